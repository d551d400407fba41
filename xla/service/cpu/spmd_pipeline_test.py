"""Tests of the CPU compiler's SPMD partitioning hook (spmd_pipeline.py)."""

import numpy as np
import pytest

import support
from xla.service.cpu import cpu_testing
from xla.service.cpu import spmd_pipeline

_GLOBAL = """HloModule m, num_partitions=4
ENTRY e {
  x = f32[8] parameter(0), sharding={devices=[4]<=[4]}
  y = f32[8] multiply(x, x)
  ROOT r = f32[8] add(y, x), sharding={replicated}
}
"""


def test_per_device_programs_are_not_partitioned(monkeypatch):
  def fail(name):
    raise AssertionError(f"looked for {name}")

  monkeypatch.setattr(spmd_pipeline, "_find", fail)
  text = """HloModule m, num_partitions=2
ENTRY e {
  x = f32[4] parameter(0), sharding={replicated}
  p = u32[] partition-id()
  c = f32[] convert(p)
  b = f32[4] broadcast(c), dimensions={}
  ROOT r = f32[4] add(x, b)
}
"""
  _, exe = cpu_testing.compile_text(text)
  x = np.arange(4, dtype=np.float32)
  got = exe.execute_spmd([[x], [x]])
  np.testing.assert_array_equal(got[1][0], x + 1)
  module = cpu_testing.parse(_GLOBAL)
  module.config.num_partitions = 1
  assert not spmd_pipeline.partition_if_sharded(module)


def test_global_program_without_partitioner_is_unimplemented(monkeypatch):
  monkeypatch.setattr(spmd_pipeline, "_find", lambda name: None)
  with pytest.raises(support.UnimplementedError,
                     match="partitioning is not available"):
    cpu_testing.compile_text(_GLOBAL)


def test_spmd_custom_calls_make_a_global_program():
  module = cpu_testing.parse("""HloModule m, num_partitions=2
ENTRY e {
  x = f32[4] parameter(0)
  ROOT s = f32[4] custom-call(x), custom_call_target="Sharding"
}
""")
  assert [i.name for i in spmd_pipeline.sharded_instructions(module)] == [
      "s"]


def test_the_hook_runs_propagation_then_the_partitioner(monkeypatch):
  calls = []

  class Pass:
    def __init__(self, name, num_partitions):
      self.name, self.n = name, num_partitions

    def run(self, module):
      calls.append((self.name, self.n, module.name))
      return True

  monkeypatch.setattr(
      spmd_pipeline, "_find",
      lambda name: lambda num_partitions: Pass(name, num_partitions))
  module = cpu_testing.parse(_GLOBAL)
  assert spmd_pipeline.partition_if_sharded(module)
  assert calls == [("ShardingPropagation", 4, "m"),
                   ("SpmdPartitioner", 4, "m")]


def test_a_global_program_runs_partitioned():
  if (spmd_pipeline._find("ShardingPropagation") is None or  # pylint: disable=protected-access
      spmd_pipeline._find("SpmdPartitioner") is None):  # pylint: disable=protected-access
    pytest.skip("the SPMD partitioner is not available")
  _, exe = cpu_testing.compile_text(_GLOBAL)
  x = np.arange(8, dtype=np.float32)
  got = exe.execute_spmd([[x[2 * p:2 * p + 2]] for p in range(4)])
  for (r,) in got:
    np.testing.assert_array_equal(r, x * x + x)


def test_shardy_exported_hlo_is_a_global_program():
  # jax's compiler_ir("hlo") of a shard_map with Shardy on (the default).
  module = cpu_testing.parse(r"""HloModule m, num_partitions=4
ENTRY e {
  v = f32[8] parameter(0)
  l = f32[2] custom-call(v), custom_call_target="xla.sdy.GlobalToLocalShape", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>"}
  ROOT g = f32[8] custom-call(l), custom_call_target="xla.sdy.LocalToGlobalShape", custom_call_has_side_effect=true
}
""")
  assert [i.name for i in spmd_pipeline.sharded_instructions(module)] == [
      "l", "g"]
  module = cpu_testing.parse(r"""HloModule m, num_partitions=4
ENTRY e {
  v = f32[8] parameter(0), frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{}]>"}
  w = f32[8] parameter(1), frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\"x\"}]>"}
  ROOT a = f32[8] add(v, w)
}
""")
  assert [i.name for i in spmd_pipeline.sharded_instructions(module)] == [
      "w"]


def test_one_partition_drops_the_spmd_custom_calls():
  # JAX's GSPMD lowering of with_sharding_constraint on one device.
  _, exe = cpu_testing.compile_text("""HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  s = f32[4] custom-call(x), custom_call_target="Sharding",
    sharding={replicated}
  ROOT n = f32[4] negate(s)
}
""")
  x = np.arange(4, dtype=np.float32)
  np.testing.assert_array_equal(exe.execute([x])[0], -x)


def test_partially_manual_without_split_data_is_manual():
  module = cpu_testing.parse("""HloModule m, num_partitions=4
ENTRY e {
  x = f32[8,4] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  s = f32[4,4] custom-call(x), custom_call_target="SPMDFullToShardShape",
    sharding={devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}
  t = f32[4,4] custom-call(s), custom_call_target="SPMDFullToShardShape",
    sharding={devices=[2,1,2]<=[4] last_tile_dims={manual}}
  ROOT r = (f32[4,4], f32[4,4]) tuple(s, t),
    sharding={{devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}, {replicated}}
}
""")
  assert spmd_pipeline.manual_where_unsplit(module) == 2
  got = {i.name: str(i.sharding)
         for i in module.entry_computation.instructions}
  assert got["s"] == "{manual}"
  assert got["r"] == "{{manual}, {replicated}}"
  # Data split under a manual subgroup stays for the partitioner to refuse.
  assert got["t"] == "{devices=[2,1,2]<=[4] last_tile_dims={manual}}"


def test_entry_shardings():
  module = cpu_testing.parse("""HloModule m, num_partitions=4
ENTRY e {
  x = f32[8] parameter(0), sharding={devices=[4]<=[4]}
  y = f32[8] parameter(1)
  ROOT t = (f32[8], f32[8]) tuple(x, y),
    sharding={{replicated}, {devices=[4]<=[4]}}
}
""")
  assert spmd_pipeline.entry_shardings(module) == {
      "parameters": ["{devices=[4]<=[4]}", "{replicated}"],
      "outputs": ["{replicated}", "{devices=[4]<=[4]}"]}


def test_the_partitioned_executable_keeps_its_shardings():
  if (spmd_pipeline._find("ShardingPropagation") is None or  # pylint: disable=protected-access
      spmd_pipeline._find("SpmdPartitioner") is None):  # pylint: disable=protected-access
    pytest.skip("the SPMD partitioner is not available")
  _, exe = cpu_testing.compile_text(_GLOBAL)
  assert exe.plan["spmd_shardings"] == {
      "parameters": ["{devices=[4]<=[4]}"], "outputs": ["{replicated}"]}


def test_a_parameter_returned_as_it_is_reports_the_outputs_sharding():
  # shard_map returning its operand's shard: the partitioned root is the
  # parameter, whose sharding is not the output's.
  if (spmd_pipeline._find("ShardingPropagation") is None or  # pylint: disable=protected-access
      spmd_pipeline._find("SpmdPartitioner") is None):  # pylint: disable=protected-access
    pytest.skip("the SPMD partitioner is not available")
  module = cpu_testing.parse("""HloModule m, num_partitions=4
ENTRY e {
  a = f32[4,4,1] parameter(0), sharding={devices=[4,1,1]<=[4]}
  s = f32[1,4,1] custom-call(a), custom_call_target="SPMDFullToShardShape", sharding={manual}
  ROOT f = f32[2,4,2] custom-call(s), custom_call_target="SPMDShardToFullShape", sharding={devices=[2,1,2]<=[2,2]T(1,0)}
}
""")
  assert spmd_pipeline.partition_if_sharded(module)
  assert spmd_pipeline.entry_shardings(module) == {
      "parameters": ["{devices=[4,1,1]<=[4]}"],
      "outputs": ["{devices=[2,1,2]<=[2,2]T(1,0)}"]}
