"""Tests for the multi-partition evaluator the SPMD tests rely on: each
collective against numpy on hand-written per-partition programs."""

import numpy as np
import pytest

import support
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.parser import hlo_parser
from xla.service.spmd import spmd_testing

ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""


def _run(body: str, args_per_partition, comps: str = ADD):
  text = f"HloModule m, num_partitions={len(args_per_partition)}\n{comps}\n" \
         f"ENTRY e {{\n{body}\n}}\n"
  module = hlo_parser.parse_and_return_verified_module(text)
  return [r[0] for r in spmd_testing.run_partitions(module,
                                                    args_per_partition)]


def _inputs(n, shape):
  return [[np.arange(np.prod(shape), dtype=np.float32).reshape(shape) +
           100 * p] for p in range(n)]


def test_partition_id():
  out = _run("ROOT i = u32[] partition-id()", [[]] * 3)
  assert [int(v) for v in out] == [0, 1, 2]


def test_all_reduce_in_groups():
  args = _inputs(4, (2,))
  out = _run("""p = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(p), channel_id=1, replica_groups={{0,2},{1,3}},
      use_global_device_ids=true, to_apply=add""", args)
  for p in range(4):
    partner = p ^ 2
    np.testing.assert_array_equal(out[p], args[p][0] + args[partner][0])


def test_all_reduce_without_channel_is_per_replica():
  # One replica: each partition is alone in its group.
  args = _inputs(2, (2,))
  out = _run("""p = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(p), replica_groups={}, to_apply=add""", args)
  for p in range(2):
    np.testing.assert_array_equal(out[p], args[p][0])


def test_all_gather_in_group_order():
  args = _inputs(4, (1, 2))
  out = _run("""p = f32[1,2] parameter(0)
  ROOT g = f32[2,2] all-gather(p), channel_id=1,
      replica_groups={{3,0},{1,2}}, dimensions={0},
      use_global_device_ids=true""", args)
  want_a = np.concatenate([args[3][0], args[0][0]])
  want_b = np.concatenate([args[1][0], args[2][0]])
  for p, want in ((0, want_a), (3, want_a), (1, want_b), (2, want_b)):
    np.testing.assert_array_equal(out[p], want)


def test_all_to_all_transposes_chunks():
  args = _inputs(2, (2, 3))
  out = _run("""p = f32[2,3] parameter(0)
  ROOT a = f32[2,3] all-to-all(p), channel_id=1, replica_groups={{0,1}},
      dimensions={0}""", args)
  for p in range(2):
    want = np.concatenate([args[0][0][p:p + 1], args[1][0][p:p + 1]])
    np.testing.assert_array_equal(out[p], want)


def test_collective_permute_and_zeros_for_non_targets():
  args = _inputs(3, (2,))
  out = _run("""p = f32[2] parameter(0)
  ROOT c = f32[2] collective-permute(p), channel_id=1,
      source_target_pairs={{0,1},{1,2}}""", args)
  np.testing.assert_array_equal(out[0], np.zeros(2, np.float32))
  np.testing.assert_array_equal(out[1], args[0][0])
  np.testing.assert_array_equal(out[2], args[1][0])


def test_collectives_inside_a_loop_match_iteration_by_iteration():
  comps = ADD + """
  cond {
    c = (s32[], f32[]) parameter(0)
    i = s32[] get-tuple-element(c), index=0
    k = s32[] constant(3)
    ROOT lt = pred[] compare(i, k), direction=LT
  }
  body {
    b = (s32[], f32[]) parameter(0)
    i = s32[] get-tuple-element(b), index=0
    one = s32[] constant(1)
    j = s32[] add(i, one)
    x = f32[] get-tuple-element(b), index=1
    y = f32[] all-reduce(x), channel_id=1, replica_groups={{0,1}},
        use_global_device_ids=true, to_apply=add
    ROOT out = (s32[], f32[]) tuple(j, y)
  }"""
  args = [[np.float32(1)], [np.float32(2)]]
  out = _run("""p = f32[] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[]) tuple(z, p)
  w = (s32[], f32[]) while(t), condition=cond, body=body
  ROOT r = f32[] get-tuple-element(w), index=1""", args, comps)
  # 3 -> 6 -> 12 -> 24 on both partitions.
  assert [float(v) for v in out] == [12.0, 12.0]


def test_a_partition_waiting_alone_is_a_deadlock_not_a_hang():
  # Partition 1 skips the all-reduce that partition 0 waits in.
  comps = ADD + """
  yes {
    a = f32[] parameter(0)
    ROOT r = f32[] all-reduce(a), channel_id=1, replica_groups={{0,1}},
        use_global_device_ids=true, to_apply=add
  }
  no {
    ROOT a = f32[] parameter(0)
  }"""
  args = [[np.float32(1)], [np.float32(2)]]
  with pytest.raises(support.XlaError, match="deadlock|stopped"):
    _run("""p = f32[] parameter(0)
  i = u32[] partition-id()
  z = u32[] constant(0)
  c = pred[] compare(i, z), direction=EQ
  ROOT r = f32[] conditional(c, p, p), true_computation=yes,
      false_computation=no""", args, comps)


def test_shard_of_and_assemble_round_trip_with_junk_padding():
  value = np.arange(35, dtype=np.float32).reshape(5, 7)
  s = HloSharding.parse("{devices=[2,2]<=[4]}")
  shards = [spmd_testing.shard_of(value, s, p, 4) for p in range(4)]
  assert all(x.shape == (3, 4) for x in shards)
  assert np.isnan(shards[3][2]).all()  # the padding row of the last tile
  np.testing.assert_array_equal(
      spmd_testing.assemble(shards, (5, 7), s, 4), value)


def test_assemble_notices_disagreeing_replicas():
  s = HloSharding.parse("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")
  value = np.arange(8, dtype=np.float32).reshape(4, 2)
  shards = [spmd_testing.shard_of(value, s, p, 4) for p in range(4)]
  shards[1] = shards[1] + 1
  with pytest.raises(AssertionError, match="partitions 0 and 1"):
    spmd_testing.assemble(shards, (4, 2), s, 4)
