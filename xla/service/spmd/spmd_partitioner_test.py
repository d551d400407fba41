"""Tests for SpmdPartitioner.

Each program is partitioned and run on every partition (with junk in the
padding of uneven shards); the reassembled result must equal the global
program's (`spmd_testing.check_partitioning`). Where the strategy matters,
the tests also check which collectives the partitioned program uses.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

import support
from xla.hlo.ir import hlo_sharding
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser
from xla.service import hlo_verifier
from xla.service.spmd import spmd_partitioner
from xla.service.spmd import spmd_testing

O = HloOpcode

COMPS = """
add {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT sum = f32[] add(ax, ay)
}
max {
  mx = f32[] parameter(0)
  my = f32[] parameter(1)
  ROOT mm = f32[] maximum(mx, my)
}
lt {
  la = f32[] parameter(0)
  lb = f32[] parameter(1)
  ROOT lc = pred[] compare(la, lb), direction=LT
}
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eqq = pred[] compare(av, bv), direction=EQ
  lti = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eqq, lti)
  pick = pred[] or(gt, tie)
  v = f32[] select(pick, av, bv)
  ix = s32[] select(pick, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, ix)
}
"""

T0 = "{devices=[4,1]<=[4]}"
T1 = "{devices=[1,4]<=[4]}"
T01 = "{devices=[2,2]<=[4]}"
V4 = "{devices=[4]<=[4]}"


def _module(body: str, comps: str = COMPS) -> str:
  return f"HloModule m\n{comps}\nENTRY e {{\n{body}\n}}\n"


def _check(body: str, n: int = 4, **kw):
  return spmd_testing.check_partitioning(_module(body), n, **kw)


_COLLECTIVES = {O.kAllGather, O.kAllReduce, O.kAllToAll,
                O.kCollectivePermute}


def _collectives(module) -> list[str]:
  return sorted(i.opcode.value for c in module.computations
                for i in c.instructions if i.opcode in _COLLECTIVES)


def _find(module, opcode):
  return [i for c in module.computations for i in c.instructions
          if i.opcode == opcode]


# -- elementwise ---------------------------------------------------------------


@pytest.mark.parametrize("shape,sharding,n", [
    ("f32[8]", V4, 4),
    ("f32[5]", "{devices=[2]<=[2]}", 2),    # uneven: 3 + 2
    ("f32[7]", V4, 4),                      # uneven: 2 + 2 + 2 + 1
    ("f32[8,6]", T01, 4),
    ("f32[5,7]", T01, 4),
    ("f32[8,6]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 4),
])
def test_elementwise_runs_locally(shape, sharding, n):
  m = _check(f"""
  p = {shape} parameter(0), sharding={sharding}
  q = {shape} parameter(1), sharding={sharding}
  e = {shape} exponential(p)
  c = {shape} clamp(p, q, e)
  ROOT a = {shape} multiply(c, q), sharding={sharding}""", n)
  assert _collectives(m) == []


def test_elementwise_with_different_operand_shardings():
  _check(f"""
  p = f32[8,6] parameter(0), sharding={T0}
  q = f32[8,6] parameter(1), sharding={T1}
  ROOT a = f32[8,6] subtract(p, q), sharding={T01}""")


def test_compare_select_and_scalar_clamp():
  _check(f"""
  p = f32[6,5] parameter(0), sharding={T01}
  lo = f32[] constant(-0.5)
  hi = f32[] constant(0.5)
  c = f32[6,5] clamp(lo, p, hi)
  z = f32[] constant(0)
  zb = f32[6,5] broadcast(z), dimensions={{}}
  g = pred[6,5] compare(p, zb), direction=GT
  ROOT s = f32[6,5] select(g, c, p), sharding={T01}""")


# -- dot -----------------------------------------------------------------------


def test_dot_batch_partitioned_is_local():
  m = _check("""
  l = f32[4,8,6] parameter(0), sharding={devices=[4,1,1]<=[4]}
  r = f32[4,6,5] parameter(1), sharding={devices=[4,1,1]<=[4]}
  ROOT d = f32[4,8,5] dot(l, r), lhs_batch_dims={0}, rhs_batch_dims={0},
      lhs_contracting_dims={2}, rhs_contracting_dims={1},
      sharding={devices=[4,1,1]<=[4]}""")
  assert _collectives(m) == []


def test_dot_contracting_partitioned_is_local_dot_then_all_reduce():
  m = _check("""
  l = f32[8,12] parameter(0), sharding={devices=[1,4]<=[4]}
  r = f32[12,6] parameter(1), sharding={devices=[4,1]<=[4]}
  ROOT d = f32[8,6] dot(l, r), lhs_contracting_dims={1},
      rhs_contracting_dims={0}""")
  assert _collectives(m) == ["all-reduce"]
  (ar,) = _find(m, O.kAllReduce)
  assert ar.attr("replica_groups") == ((0, 1, 2, 3),)
  assert ar.attr("use_global_device_ids") and ar.attr("channel_id")
  assert ar.operand(0).opcode == O.kDot


def test_dot_contracting_with_partial_replication_groups():
  # Contracting dim over the second mesh axis: sums within rows of the mesh.
  m = _check("""
  l = f32[8,4] parameter(0), sharding={devices=[2,2]<=[4]}
  r = f32[4,6] parameter(1),
      sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  ROOT d = f32[8,6] dot(l, r), lhs_contracting_dims={1},
      rhs_contracting_dims={0},
      sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}""")
  assert _collectives(m) == ["all-reduce"]
  (ar,) = _find(m, O.kAllReduce)
  assert sorted(ar.attr("replica_groups")) == [(0, 1), (2, 3)]


def test_dot_non_contracting_partitioned_is_local():
  m = _check("""
  l = f32[8,6] parameter(0),
      sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  r = f32[6,10] parameter(1),
      sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  ROOT d = f32[8,10] dot(l, r), lhs_contracting_dims={1},
      rhs_contracting_dims={0}, sharding={devices=[2,2]<=[4]}""")
  assert _collectives(m) == []


def test_dot_reshards_an_operand_otherwise():
  m = _check("""
  l = f32[8,6] parameter(0), sharding={devices=[1,4]<=[4]}
  r = f32[6,10] parameter(1), sharding={devices=[1,4]<=[4]}
  ROOT d = f32[8,10] dot(l, r), lhs_contracting_dims={1},
      rhs_contracting_dims={0}, sharding={devices=[4,1]<=[4]}""")
  assert _collectives(m)  # something had to move


def test_dot_uneven_contraction_masks_the_padding():
  # 5 contracted elements on 2 partitions: the second shard's padding is
  # NaN in the test inputs; unmasked it would poison the sum.
  m = _check("""
  l = f32[3,5] parameter(0), sharding={devices=[1,2]<=[2]}
  r = f32[5,4] parameter(1), sharding={devices=[2,1]<=[2]}
  ROOT d = f32[3,4] dot(l, r), lhs_contracting_dims={1},
      rhs_contracting_dims={0}""", n=2)
  assert _collectives(m) == ["all-reduce"]
  assert _find(m, O.kSelect)


def test_dot_integer_and_matrix_vector():
  _check("""
  l = s32[6,8] parameter(0), sharding={devices=[1,4]<=[4]}
  r = s32[8] parameter(1), sharding={devices=[4]<=[4]}
  ROOT d = s32[6] dot(l, r), lhs_contracting_dims={1},
      rhs_contracting_dims={0}""")


# -- reduce --------------------------------------------------------------------


def test_reduce_over_sharded_dim_all_reduces():
  m = _check(f"""
  p = f32[8,6] parameter(0), sharding={T01}
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(p, z), dimensions={{1}}, to_apply=add,
      sharding={{devices=[2,2]<=[4] last_tile_dim_replicate}}""")
  assert _collectives(m) == ["all-reduce"]
  (ar,) = _find(m, O.kAllReduce)
  assert sorted(ar.attr("replica_groups")) == [(0, 1), (2, 3)]


def test_reduce_over_unsharded_dim_is_local():
  m = _check(f"""
  p = f32[8,6] parameter(0), sharding={T0}
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(p, z), dimensions={{1}}, to_apply=add,
      sharding={V4}""")
  assert _collectives(m) == []


@pytest.mark.parametrize("reducer,init", [("add", "0"), ("max", "-inf")])
def test_reduce_uneven_masks_with_the_identity(reducer, init):
  m = _check(f"""
  p = f32[5,7] parameter(0), sharding={T01}
  z = f32[] constant({init})
  ROOT r = f32[] reduce(p, z), dimensions={{0,1}}, to_apply={reducer}""")
  assert _collectives(m) == ["all-reduce"]


def test_reduce_with_non_identity_init_gathers_instead():
  # 3 + sum would count the 3 once per partition if partial sums were
  # all-reduced; the reduced dim is gathered instead.
  m = _check(f"""
  p = f32[8,6] parameter(0), sharding={T1}
  z = f32[] constant(3)
  ROOT r = f32[8] reduce(p, z), dimensions={{1}}, to_apply=add""")
  assert "all-reduce" not in _collectives(m)


def test_variadic_reduce_over_sharded_dim():
  m = _check("""
  p = f32[5,7] parameter(0), sharding={devices=[1,4]<=[4]}
  i = s32[5,7] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[5], s32[5]) reduce(p, i, ninf, zero), dimensions={1},
      to_apply=argmax""")
  assert "all-reduce" not in _collectives(m)


# -- resharding ----------------------------------------------------------------

SHARDINGS = {
    "replicated": "{replicated}",
    "tile0": T0,
    "tile1": T1,
    "tile01": T01,
    "tile01_transposed": "{devices=[2,2]<=[2,2]T(1,0)}",
    "partial0": "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
    "partial1": "{devices=[1,2,2]<=[4] last_tile_dim_replicate}",
    "tile0_reversed": "{devices=[4,1]3,2,1,0}",
    "tile0_rotated": "{devices=[4,1]1,2,3,0}",
}


@pytest.mark.parametrize("shape", ["f32[8,4]", "f32[5,7]"])
@pytest.mark.parametrize("src,dst", list(itertools.product(SHARDINGS,
                                                             SHARDINGS)))
def test_reshard_between_every_pair(shape, src, dst):
  _check(f"""
  p = {shape} parameter(0), sharding={SHARDINGS[src]}
  ROOT c = {shape} custom-call(p), custom_call_target="Sharding",
      sharding={SHARDINGS[dst]}""")


@pytest.mark.parametrize("src,dst,want", [
    ("replicated", "tile01", []),  # a local dynamic-slice
    ("partial0", "tile01", []),    # refinement: a local slice too
    ("tile01", "replicated", ["all-gather", "all-gather"]),
    ("tile0", "tile1", ["all-to-all"]),
    ("tile0", "tile0_reversed", ["collective-permute"]),
    ("tile0", "tile0_rotated", ["collective-permute"]),
    ("tile01", "tile01_transposed", ["collective-permute"]),
    ("partial0", "partial1", ["all-to-all"]),
])
def test_reshard_uses_the_expected_collective(src, dst, want):
  m = _check(f"""
  p = f32[8,4] parameter(0), sharding={SHARDINGS[src]}
  ROOT c = f32[8,4] custom-call(p), custom_call_target="Sharding",
      sharding={SHARDINGS[dst]}""")
  assert _collectives(m) == want


def test_replicated_to_tiled_reads_offsets_from_a_partition_id_table():
  m = _check(f"""
  p = f32[8,4] parameter(0)
  ROOT c = f32[8,4] custom-call(p), custom_call_target="Sharding",
      sharding={T0}""")
  (ds,) = [i for i in _find(m, O.kDynamicSlice) if i.shape.rank == 2]
  assert ds.dynamic_slice_sizes == (2, 4)
  assert _find(m, O.kPartitionId)
  tables = [c.literal.array.tolist() for c in _find(m, O.kConstant)
            if c.shape.rank == 1]
  assert [0, 2, 4, 6] in tables


# -- data movement ops ---------------------------------------------------------


@pytest.mark.parametrize("body", [
    # broadcast: the new dim tiled, the operand's dim from the target
    f"""p = f32[6] parameter(0), sharding={V4}
  b = f32[5,6] broadcast(p), dimensions={{1}}
  ROOT n = f32[5,6] negate(b), sharding={T01}""",
    # transpose
    f"""p = f32[8,6] parameter(0), sharding={T01}
  ROOT t = f32[6,8] transpose(p), dimensions={{1,0}}, sharding={T0}""",
    # reshape that splits / merges the tiled dim
    f"""p = f32[8,6] parameter(0), sharding={T0}
  ROOT t = f32[2,4,6] reshape(p), sharding={{devices=[2,2,1]<=[4]}}""",
    f"""p = f32[4,2,6] parameter(0), sharding={{devices=[4,1,1]<=[4]}}
  ROOT t = f32[8,6] reshape(p), sharding={T0}""",
    # reshape that cuts through tiles: done on the whole value
    f"""p = f32[8,6] parameter(0), sharding={T1}
  ROOT t = f32[6,8] reshape(p), sharding={T1}""",
    # slice, pad, concatenate, reverse
    f"""p = f32[8,6] parameter(0), sharding={T01}
  ROOT s = f32[4,5] slice(p), slice={{[1:8:2], [0:5]}}, sharding={T01}""",
    f"""p = f32[8,6] parameter(0), sharding={T01}
  z = f32[] constant(7)
  ROOT s = f32[11,8] pad(p, z), padding=1_2x1_1, sharding={T01}""",
    f"""p = f32[5,6] parameter(0), sharding={T01}
  q = f32[3,6] parameter(1), sharding={T1}
  ROOT c = f32[8,6] concatenate(p, q), dimensions={{0}}, sharding={T01}""",
    f"""p = f32[7,6] parameter(0), sharding={T01}
  ROOT r = f32[7,6] reverse(p), dimensions={{0}}, sharding={T01}""",
    # dynamic-slice and dynamic-update-slice
    f"""p = f32[8,6] parameter(0), sharding={T01}
  i = s32[] parameter(1)
  ROOT s = f32[3,6] dynamic-slice(p, i, i), dynamic_slice_sizes={{3,6}},
      sharding={T01}""",
    f"""p = f32[8,6] parameter(0), sharding={T01}
  u = f32[2,6] parameter(1), sharding={T1}
  i = s32[] parameter(2)
  ROOT s = f32[8,6] dynamic-update-slice(p, u, i, i), sharding={T01}""",
    # sort along the tiled dim
    f"""p = f32[8,6] parameter(0), sharding={T01}
  ROOT s = f32[8,6] sort(p), dimensions={{1}}, to_apply=lt, sharding={T01}""",
    # convert and a tuple result
    f"""p = f32[8,6] parameter(0), sharding={T01}
  c = s32[8,6] convert(p)
  z = f32[] constant(0)
  r = f32[8] reduce(p, z), dimensions={{1}}, to_apply=add
  ROOT t = (s32[8,6], f32[8]) tuple(c, r), sharding={{{T1}, {{replicated}}}}""",
], ids=["broadcast", "transpose", "reshape_split", "reshape_merge",
        "reshape_whole", "slice", "pad", "concatenate", "reverse",
        "dynamic_slice", "dynamic_update_slice", "sort", "convert_tuple"])
def test_data_movement(body):
  _check(body)


def test_local_reshape_and_transpose_need_no_collectives():
  m = _check(f"""
  p = f32[8,6] parameter(0), sharding={T0}
  r = f32[2,4,6] reshape(p)
  ROOT t = f32[6,2,4] transpose(r), dimensions={{2,0,1}},
      sharding={{devices=[1,2,2]<=[4]}}""")
  assert _collectives(m) == []


# -- iota, constants -----------------------------------------------------------


@pytest.mark.parametrize("et,dim", [("s32", 0), ("f32", 1), ("u8", 0)])
def test_iota_adds_the_partition_offset(et, dim):
  m = _check(f"""
  ROOT i = {et}[7,5] iota(), iota_dimension={dim}, sharding={T01}""")
  assert _collectives(m) == []


def test_constant_is_sliced_per_partition():
  m = _check("""
  c = f32[2,3] constant({{1,2,3},{4,5,6}})
  ROOT n = f32[2,3] negate(c), sharding={devices=[2,2]<=[4]}""")
  assert _collectives(m) == []


# -- while loops ---------------------------------------------------------------

LOOP = """
cond {
  c = (s32[], f32[8,6], f32[6]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  k = s32[] constant(3)
  ROOT lt = pred[] compare(i, k), direction=LT
}
body {
  b = (s32[], f32[8,6], f32[6]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[8,6] get-tuple-element(b), index=1
  acc = f32[6] get-tuple-element(b), index=2
  y = f32[8,6] multiply(x, x)
  z = f32[] constant(0)
  r = f32[6] reduce(y, z), dimensions={0}, to_apply=add
  acc2 = f32[6] add(acc, r)
  half = f32[] constant(0.5)
  hb = f32[8,6] broadcast(half), dimensions={}
  y2 = f32[8,6] multiply(y, hb)
  ROOT out = (s32[], f32[8,6], f32[6]) tuple(j, y2, acc2)
}
"""


@pytest.mark.parametrize("sharding", [T01, T0, "{devices=[5,1]<=[5]}"])
def test_while_loop_carrying_sharded_state(sharding):
  n = 5 if "5" in sharding else 4
  m = spmd_testing.check_partitioning(_module(f"""
  p = f32[8,6] parameter(0), sharding={sharding}
  z = s32[] constant(0)
  zf = f32[] constant(0)
  s = f32[6] broadcast(zf), dimensions={{}}
  t = (s32[], f32[8,6], f32[6]) tuple(z, p, s)
  w = (s32[], f32[8,6], f32[6]) while(t), condition=cond, body=body
  x = f32[8,6] get-tuple-element(w), index=1
  a = f32[6] get-tuple-element(w), index=2
  ROOT o = (f32[8,6], f32[6]) tuple(x, a)""", COMPS + LOOP), n)
  (w,) = _find(m, O.kWhile)
  # The loop carries the shards, and its body all-reduces the column sums.
  assert w.shape.tuple_shapes[1] != hlo_parser.parse_shape("f32[8,6]")
  assert any(i.opcode == O.kAllReduce
             for i in w.while_body.instructions)


# -- manual regions ------------------------------------------------------------

SHMAP = """
region_0.1 {
  x.2 = f32[] parameter(0)
  y.2 = f32[] parameter(1)
  ROOT add.1 = f32[] add(x.2, y.2)
}
shmap_body.2 {
  a.3 = f32[4,2] parameter(0)
  psum.5 = f32[4,2] all-reduce(a.3), channel_id=1,
      replica_groups={{0,2},{1,3}}, use_global_device_ids=true,
      to_apply=region_0.1
  constant.1 = f32[] constant(2)
  broadcast.1 = f32[4,2] broadcast(constant.1), dimensions={}
  ROOT mul.1 = f32[4,2] multiply(psum.5, broadcast.1)
}
"""


def test_manual_region_as_shard_map_emits_it():
  text = _module("""
  a.1 = f32[8,4] parameter(0)
  s.5 = f32[8,4] custom-call(a.1), custom_call_target="Sharding",
      sharding={devices=[2,2]<=[4]}
  s.6 = f32[4,2] custom-call(s.5), custom_call_target="SPMDFullToShardShape",
      sharding={manual}
  s.7 = f32[4,2] call(s.6), to_apply=shmap_body.2
  s.8 = f32[4,2] custom-call(s.7), custom_call_target="Sharding",
      sharding={manual}
  ROOT s.9 = f32[4,4] custom-call(s.8),
      custom_call_target="SPMDShardToFullShape",
      sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}""",
                 SHMAP)
  a = np.arange(32, dtype=np.float32).reshape(8, 4)
  # psum over the mesh's first axis of each partition's block, times 2.
  want = (a[:4] + a[4:]) * 2
  m = spmd_testing.check_partitioning(text, 4, [a], expected=[want])
  # The manual body's own all-reduce stays, with its own channel id; ours
  # get fresh ones.
  ids = [i.attr("channel_id") for c in m.computations for i in c.instructions
         if i.has_attr("channel_id")]
  assert len(ids) == len(set(ids))
  assert not any(i.opcode == O.kCustomCall for i in m.instructions())


def test_manual_value_meeting_a_tiled_one_is_unimplemented():
  text = _module("""
  a = f32[8,4] parameter(0), sharding={manual}
  b = f32[8,4] parameter(1), sharding={devices=[4,1]<=[4]}
  ROOT s = f32[8,4] add(a, b), sharding={manual}""")
  module = hlo_parser.parse_and_return_verified_module(text)
  with pytest.raises(support.UnimplementedError, match="add"):
    spmd_partitioner.SpmdPartitioner(4).run(module)


# -- ops run whole, and what cannot be -----------------------------------------


def test_op_without_handler_runs_on_gathered_operands():
  m = _check(f"""
  p = f32[4,4] parameter(0), sharding={T0}
  t = f32[4,4] transpose(p), dimensions={{1,0}}
  mm = f32[4,4] dot(p, t), lhs_contracting_dims={{1}},
      rhs_contracting_dims={{0}}
  c = f32[] constant(10)
  b = f32[4,4] broadcast(c), dimensions={{}}
  i = s32[4,4] iota(), iota_dimension=0
  j = s32[4,4] iota(), iota_dimension=1
  eq = pred[4,4] compare(i, j), direction=EQ
  zz = f32[] constant(0)
  z = f32[4,4] broadcast(zz), dimensions={{}}
  d = f32[4,4] select(eq, b, z)
  s = f32[4,4] add(mm, d)
  ROOT r = f32[4,4] cholesky(s), lower=true, sharding={T01}""")
  (ch,) = _find(m, O.kCholesky)
  assert ch.shape.dimensions == (4, 4)  # the whole matrix


@pytest.mark.parametrize("body,op", [
    ("ROOT i = u32[] partition-id()", "partition-id"),
    ("""p = f32[8] parameter(0), sharding={devices=[4]<=[4]}
  ROOT r = f32[8] all-reduce(p), replica_groups={}, to_apply=add""",
     "all-reduce"),
    ("""a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[8] rng(a, b), distribution=rng_uniform,
      sharding={devices=[4]<=[4]}""", "rng"),
    ("""p = f32[8] parameter(0), sharding={maximal device=1}
  ROOT n = f32[8] negate(p)""", "maximal"),
    ("""p = f32[8,4] parameter(0),
      sharding={devices=[2,1,2]<=[4] last_tile_dims={manual}}
  ROOT n = f32[8,4] negate(p)""", "last_tile_dims={manual}"),
])
def test_unsupported_cases_raise_unimplemented_naming_them(body, op):
  module = hlo_parser.parse_and_return_verified_module(_module(body))
  with pytest.raises(support.UnimplementedError, match=op):
    spmd_partitioner.partition(module, 4)


# -- the module after the pass -------------------------------------------------


def test_config_records_partitions_and_per_partition_layout():
  text = _module(f"""
  p = f32[8,6] parameter(0), sharding={T01}
  ROOT n = f32[8,6] negate(p), sharding={T0}""").replace(
      "HloModule m", "HloModule m, entry_computation_layout="
      "{(f32[8,6]{1,0})->f32[8,6]{1,0}}")
  module = hlo_parser.parse_and_return_verified_module(text)
  spmd_partitioner.partition(module, 4)
  config = module.config
  assert config.num_partitions == 4 and config.use_spmd_partitioning
  layout = config.entry_computation_layout
  assert [s.dimensions for s in layout.parameters] == [(4, 3)]
  assert layout.result.dimensions == (2, 6)
  entry = module.entry_computation
  assert hlo_sharding.of(entry.parameter_instruction(0)) == (
      hlo_sharding.HloSharding.parse(T01))
  assert hlo_sharding.of(entry.root_instruction) == (
      hlo_sharding.HloSharding.parse(T0))
  # The partitioned module prints, parses back and verifies.
  again = hlo_parser.parse_and_return_verified_module(module.to_string())
  assert again.config.num_partitions == 4
  hlo_verifier.verify(again)


def test_num_partitions_must_match_the_shardings():
  module = hlo_parser.parse_and_return_verified_module(_module(f"""
  p = f32[8,6] parameter(0), sharding={T01}
  ROOT n = f32[8,6] negate(p)"""))
  with pytest.raises(support.InvalidArgumentError, match="partitions"):
    spmd_partitioner.SpmdPartitioner(2).run(module)


# -- unreduced values ------------------------------------------------------------


def _partition_text(text: str, n: int):
  module = hlo_parser.parse_and_return_unverified_module(text)
  spmd_partitioner.SpmdPartitioner(n).run(module)
  hlo_verifier.verify(module)
  return module


def test_unreduced_parameter_reduced_by_a_reshard():
  # Each device holds a partial of its row tile; replicated is their sum
  # (an all-reduce over each unreduced group, here {0,1} and {2,3}), then
  # the tiles gathered.
  module = _partition_text(_module("""
  p = f32[4,2] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dims={unreduced}}
  ROOT r = f32[4,2] custom-call(p), custom_call_target="Sharding", sharding={replicated}
"""), 4)
  assert _collectives(module) == ["all-gather", "all-reduce"]
  parts = [np.full((2, 2), p + 1, np.float32) for p in range(4)]
  out = spmd_testing.run_partitions(module, [[x] for x in parts])
  expected = np.concatenate([np.full((2, 2), 3.), np.full((2, 2), 7.)])
  for (r,) in out:
    np.testing.assert_array_equal(r, expected)


def test_unreduced_partials_pass_through_linear_ops():
  module = _partition_text(_module("""
  p = f32[4] parameter(0), sharding={unreduced}
  q = f32[4] parameter(1), sharding={unreduced}
  s = f32[4] add(p, q), sharding={unreduced}
  ROOT c = f32[4] copy(s), sharding={unreduced}
"""), 2)
  assert _collectives(module) == []
  out = spmd_testing.run_partitions(
      module, [[np.full(4, 1., np.float32), np.full(4, 2., np.float32)],
               [np.full(4, 5., np.float32), np.full(4, 7., np.float32)]])
  np.testing.assert_array_equal(out[0][0], np.full(4, 3.))
  np.testing.assert_array_equal(out[1][0], np.full(4, 12.))


def test_other_ops_read_unreduced_values_reduced():
  # sine is not linear: it reads the sum, and an unreduced result keeps
  # the value on the first device of each group, zeros elsewhere.
  module = _partition_text(_module("""
  p = f32[4] parameter(0), sharding={unreduced}
  ROOT s = f32[4] sine(p), sharding={unreduced}
"""), 2)
  out = spmd_testing.run_partitions(
      module, [[np.full(4, 0.25, np.float32)], [np.full(4, 0.75, np.float32)]])
  np.testing.assert_allclose(out[0][0], np.sin(np.full(4, 1.)), rtol=1e-6)
  np.testing.assert_array_equal(out[1][0], np.zeros(4))


def test_replicated_to_unreduced_keeps_one_copy_per_group():
  module = _partition_text(_module("""
  p = f32[2] parameter(0), sharding={replicated}
  ROOT r = f32[2] custom-call(p), custom_call_target="Sharding", sharding={devices=[1,2,2]<=[4] last_tile_dims={unreduced, replicated}}
"""), 4)
  out = spmd_testing.run_partitions(
      module, [[np.array([1., 2.], np.float32)] for _ in range(4)])
  # Groups {0,2} and {1,3}: devices 0 and 1 keep the value.
  got = [r[0].tolist() for r in out]
  assert got == [[1., 2.], [1., 2.], [0., 0.], [0., 0.]]


def test_contraction_over_the_unreduced_axis_keeps_the_partials():
  # x split by columns and y by rows over the same devices: each device's
  # local product is its partial of the unreduced result (no all-reduce).
  module = _partition_text(_module("""
  x = f32[2,2] parameter(0), sharding={devices=[1,2]<=[2]}
  y = f32[2,2] parameter(1), sharding={devices=[2,1]<=[2]}
  ROOT d = f32[2,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={unreduced}
"""), 2)
  assert _collectives(module) == []
  a = np.arange(4, dtype=np.float32).reshape(2, 2)
  out = spmd_testing.run_partitions(
      module, [[a[:, :1], a[:1, :]], [a[:, 1:], a[1:, :]]])
  np.testing.assert_array_equal(out[0][0], [[0, 0], [0, 2]])
  np.testing.assert_array_equal(out[1][0], [[2, 3], [6, 9]])


def test_sum_over_the_unreduced_axis_keeps_the_partials():
  module = _partition_text(_module("""
  x = f32[8] parameter(0), sharding={devices=[2]<=[2]}
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add, sharding={unreduced}
"""), 2)
  assert _collectives(module) == []
  x = np.arange(8, dtype=np.float32)
  out = spmd_testing.run_partitions(module, [[x[:4]], [x[4:]]])
  assert [float(o[0]) for o in out] == [6., 22.]


def test_tiled_to_unreduced_places_each_tile_in_zeros():
  # As XLA: device 0 holds [0, 1, 0, 0], device 1 [0, 0, 2, 3].
  module = _partition_text(_module("""
  p = f32[4] parameter(0), sharding={devices=[2]<=[2]}
  ROOT r = f32[4] custom-call(p), custom_call_target="Sharding", sharding={unreduced}
"""), 2)
  assert _collectives(module) == []
  x = np.arange(4, dtype=np.float32)
  out = spmd_testing.run_partitions(module, [[x[:2]], [x[2:]]])
  assert [o[0].tolist() for o in out] == [[0, 1, 0, 0], [0, 0, 2, 3]]


def test_adding_scatter_into_unreduced_scatters_each_devices_tile():
  # bincount with an unreduced result (as XLA): each device counts its own
  # indices; the operand is kept on the first device.
  module = _partition_text(_module("""
  o = s32[2] parameter(0), sharding={replicated}
  i = s32[4,1] parameter(1), sharding={devices=[2,1]<=[2]}
  u = s32[4] parameter(2), sharding={replicated}
  ROOT s = s32[2] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=addi, sharding={unreduced}
""", COMPS + """
addi {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}
"""), 2)
  assert _collectives(module) == []
  o = np.array([10, 20], np.int32)
  i = np.array([[1], [1], [0], [1]], np.int32)
  u = np.array([1, 2, 3, 4], np.int32)
  out = spmd_testing.run_partitions(module, [[o, i[:2], u], [o, i[2:], u]])
  assert [r[0].tolist() for r in out] == [[10, 23], [3, 4]]


def test_data_movement_runs_on_unreduced_partials():
  # transpose, convert, reshape and a dynamic-update-slice of an unreduced
  # accumulator with an unreduced update are linear: each device moves its
  # own partials and nothing is summed (what keeps a scanned gradient
  # unreduced until after the loop).
  module = _partition_text(_module("""
  p = f32[2,3] parameter(0), sharding={unreduced}
  a = bf16[4,3,2] parameter(1), sharding={unreduced}
  i = s32[] parameter(2), sharding={replicated}
  t = f32[3,2] transpose(p), dimensions={1,0}, sharding={unreduced}
  c = bf16[3,2] convert(t), sharding={unreduced}
  r = bf16[1,3,2] reshape(c), sharding={unreduced}
  z = s32[] constant(0)
  d = bf16[4,3,2] dynamic-update-slice(a, r, i, z, z), sharding={unreduced}
  ROOT s = bf16[2,3,2] slice(d), slice={[1:3], [0:3], [0:2]}, sharding={unreduced}
"""), 2)
  assert _collectives(module) == []
  rng = np.random.default_rng(0)
  ps = [rng.integers(-4, 5, (2, 3)).astype(np.float32) for _ in range(2)]
  acc = [rng.integers(-4, 5, (4, 3, 2)).astype(np.float32) for _ in range(2)]
  bf = ml_dtypes.bfloat16
  out = spmd_testing.run_partitions(
      module, [[ps[k], acc[k].astype(bf), np.int32(2)] for k in range(2)])
  total = sum(o[0].astype(np.float32) for o in out)
  want = acc[0] + acc[1]
  want[2] = (ps[0] + ps[1]).T
  np.testing.assert_array_equal(total, want[1:3])


def test_convert_between_kinds_reads_the_sum():
  # float -> int is not linear: the partials are summed first.
  module = _partition_text(_module("""
  p = f32[4] parameter(0), sharding={unreduced}
  ROOT c = s32[4] convert(p), sharding={unreduced}
"""), 2)
  assert _collectives(module) == ["all-reduce"]
  out = spmd_testing.run_partitions(
      module, [[np.full(4, 0.5, np.float32)], [np.full(4, 0.5, np.float32)]])
  assert out[0][0].tolist() == [1, 1, 1, 1]
  assert out[1][0].tolist() == [0, 0, 0, 0]


def _recording(monkeypatch, target: str, fn):
  """Registers evaluator custom call `target` = fn(operands); returns the
  list of the operands of every call."""
  from xla.hlo.evaluator import hlo_evaluator  # pylint: disable=g-import-not-at-top
  calls = []

  def handler(instr, operands):
    calls.append([np.array(o) for o in operands])
    return fn(*operands)

  monkeypatch.setitem(hlo_evaluator.BUILTIN_CUSTOM_CALLS, target, handler)
  return calls


def test_maximal_custom_call_runs_on_its_device_alone(monkeypatch):
  # A host callback under jit: JAX annotates it {maximal device=D}. It runs
  # once, on D, with the whole operand; every partition gets its result.
  # Its user is not annotated and must not be pulled onto D.
  calls = _recording(monkeypatch, "test.scaled",
                     lambda x: (np.asarray(x) * 3, np.int32(7)))
  module = _check(f"""p = f32[8,4] parameter(0), sharding={T0}
  c = (f32[8,4], s32[]) custom-call(p), custom_call_target="test.scaled", custom_call_has_side_effect=true, sharding={{{{maximal device=2}}, {{maximal device=2}}}}
  c0 = f32[8,4] get-tuple-element(c), index=0
  c1 = s32[] get-tuple-element(c), index=1
  n = f32[8,4] negate(c0)
  b = s32[8,4] broadcast(c1), dimensions={{}}
  f = f32[8,4] convert(b)
  ROOT r = f32[8,4] add(n, f)""")
  # The global run's call, then partition 2's alone.
  assert len(calls) == 2
  np.testing.assert_array_equal(calls[1][0], calls[0][0])
  assert calls[1][0].shape == (8, 4)
  assert _find(module, O.kConditional)
  root = module.entry_computation.root_instruction
  assert not hlo_sharding.of(root).is_maximal


def test_maximal_custom_call_without_results(monkeypatch):
  # jax.debug.print: no results, the sharding is on the call itself.
  calls = _recording(monkeypatch, "test.print", lambda x: None)
  _check(f"""p = f32[8,4] parameter(0), sharding={T0}
  c = () custom-call(p), custom_call_target="test.print", custom_call_has_side_effect=true, sharding={{maximal device=0}}
  ROOT r = f32[8,4] negate(p), sharding={T0}""")
  assert len(calls) == 2 and calls[1][0].shape == (8, 4)


def test_maximal_sharding_names_a_device_of_the_program(monkeypatch):
  _recording(monkeypatch, "test.print", lambda x: None)
  with pytest.raises(support.InvalidArgumentError, match="device 5"):
    _check(f"""p = f32[8,4] parameter(0), sharding={T0}
  c = () custom-call(p), custom_call_target="test.print", custom_call_has_side_effect=true, sharding={{maximal device=5}}
  ROOT r = f32[8,4] negate(p), sharding={T0}""")


def test_per_partition_custom_call_sees_local_shards(monkeypatch):
  # jax.debug.print(..., partitioned=True): every partition calls back with
  # its own shard of the operand, as sharded.
  calls = _recording(monkeypatch, "test.shard_print", lambda x: None)
  monkeypatch.setattr(spmd_partitioner, "_PER_PARTITION_TARGETS",
                      {"test.shard_print"})
  x = np.arange(32, dtype=np.float32).reshape(8, 4)
  _check(f"""p = f32[8,4] parameter(0), sharding={T0}
  c = () custom-call(p), custom_call_target="test.shard_print", custom_call_has_side_effect=true, sharding={{maximal device=0}}
  ROOT r = f32[8,4] negate(p), sharding={T0}""", args=[x])
  # The global run's call, then one per partition with its rows.
  assert len(calls) == 5
  shards = sorted((c[0] for c in calls[1:]), key=lambda a: a[0, 0])
  np.testing.assert_array_equal(np.concatenate(shards), x)
