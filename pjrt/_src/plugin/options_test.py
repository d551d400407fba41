"""Tests of options.py: create options and CompileOptionsProto decoding."""

import pytest

import support
from pjrt._src import compile_options as co
from pjrt._src.plugin import options


def test_defaults():
  opts = options.client_options({}, environ={})
  assert opts == options.ClientOptions(num_devices=1, backend="auto")


def test_create_option_wins_over_environment():
  environ = {options.NUM_DEVICES_ENV: "7", options.BACKEND_ENV: "evaluator"}
  assert options.client_options({}, environ) == options.ClientOptions(
      7, "evaluator")
  assert options.client_options({"num_devices": 2, "backend": "cpu"},
                                environ) == options.ClientOptions(2, "cpu")


def test_values_may_be_strings_as_jax_passes_them():
  opts = options.client_options({"num_devices": " 3 "}, environ={})
  assert opts.num_devices == 3


@pytest.mark.parametrize("named", [
    {"num_devices": 0},
    {"num_devices": 1000},
    {"num_devices": "four"},
    {"num_devices": True},
    {"backend": "gpu"},
    {"no_such_option": 1},
])
def test_bad_options_are_invalid(named):
  with pytest.raises(support.InvalidArgumentError):
    options.client_options(named, environ={})


def test_distributed_options():
  opts = options.client_options({"node_id": 0, "num_nodes": "1"}, environ={})
  assert opts.num_devices == 1  # JAX's CPU client's default too
  opts = options.client_options({"node_id": "1", "num_nodes": 3,
                                 "partition_index": 0}, environ={})
  assert (opts.node_id, opts.num_nodes) == (1, 3)
  for bad in ({"num_nodes": 0}, {"num_nodes": 2, "node_id": 2},
              {"node_id": -1}):
    with pytest.raises(support.InvalidArgumentError, match="node"):
      options.client_options(bad, environ={})


def test_timeouts():
  opts = options.client_options({"topology_timeout_s": "2.5"}, environ={
      options.CROSS_PROCESS_TIMEOUT_ENV: "7"})
  assert opts.topology_timeout_s == 2.5 and opts.cross_process_timeout_s == 7
  assert options.client_options({}, environ={}).topology_timeout_s == 300
  for bad in (0, "-1", "soon", True):
    with pytest.raises(support.InvalidArgumentError, match="seconds"):
      options.client_options({"topology_timeout_s": bad}, environ={})


def test_decode_compile_options():
  data = co.compile_options(num_replicas=2, num_partitions=1,
                            device_assignment=[[3], [1]],
                            use_spmd_partitioning=True)
  opts = options.decode_compile_options(data)
  assert (opts.num_replicas, opts.num_partitions) == (2, 1)
  assert opts.device_assignment == ((3,), (1,))
  assert opts.use_spmd_partitioning and opts.device_ordinal == -1
  assert not opts.compile_portable_executable


def test_empty_options_mean_one_replica_one_partition():
  opts = options.decode_compile_options(b"")
  assert (opts.num_replicas, opts.num_partitions) == (1, 1)
  assert opts.device_assignment is None


def test_unset_counts_in_build_options_read_zero():
  # proto3 drops zeros: num_replicas=0 is indistinguishable from unset.
  opts = options.decode_compile_options(co.compile_options(num_replicas=0))
  assert opts.num_replicas == 0 and opts.num_partitions == 1


def test_garbage_is_invalid():
  with pytest.raises(support.InvalidArgumentError, match="CompileOptionsProto"):
    options.decode_compile_options(b"\xff\xff\xff\xff")


def test_sharding_propagation_flags():
  data = co.compile_options(
      num_partitions=4, allow_spmd_sharding_propagation_to_parameters=[
          True, False, True],
      allow_spmd_sharding_propagation_to_output=[False])
  opts = options.decode_compile_options(data)
  assert opts.propagation_to_parameters == (True, False, True)
  assert opts.propagation_to_output == (False,)
  assert options.decode_compile_options(
      co.compile_options()).propagation_to_output == ()


def test_env_option_overrides():
  data = co.compile_options(env_option_overrides=[
      ("a", "text"), ("b", True), ("c", -3), ("d", 1.5)])
  opts = options.decode_compile_options(data)
  assert opts.option_overrides == (("a", "text"), ("b", True), ("c", -3),
                                   ("d", 1.5))
  assert options.decode_compile_options(
      co.compile_options()).option_overrides == ()


def test_intra_op_parallelism_threads():
  assert options.client_options(
      {}, environ={}).intra_op_parallelism_threads == 0
  environ = {options.INTRA_OP_THREADS_ENV: "3"}
  assert options.client_options(
      {}, environ).intra_op_parallelism_threads == 3
  # A create option wins over the variable; strings as JAX passes them.
  assert options.client_options(
      {"intra_op_parallelism_threads": "1"},
      environ).intra_op_parallelism_threads == 1
  # -1 (XLA's LocalClientOptions default) and 0 both mean one per core.
  assert options.client_options(
      {"intra_op_parallelism_threads": -1},
      environ={}).intra_op_parallelism_threads == 0
  for bad in (-2, "two", True, options.MAX_INTRA_OP_THREADS + 1):
    with pytest.raises(support.InvalidArgumentError,
                       match="intra_op_parallelism_threads"):
      options.client_options({"intra_op_parallelism_threads": bad},
                             environ={})
