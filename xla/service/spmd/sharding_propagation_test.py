"""Tests for ShardingPropagation."""

import pytest

from xla.hlo.ir import hlo_sharding
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.parser import hlo_parser
from xla.service import hlo_verifier
from xla.service.spmd import sharding_propagation as sp

ADD = """
add {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT sum = f32[] add(ax, ay)
}
"""


def _propagate(body: str, n: int = 4, computations: str = "",
               header: str = "", **config):
  text = f"HloModule m{header}\n{computations}\nENTRY e {{\n{body}\n}}\n"
  module = hlo_parser.parse_and_return_verified_module(text)
  for key, value in config.items():
    setattr(module.config, key, value)
  sp.ShardingPropagation(n).run(module)
  hlo_verifier.verify(module)
  return {i.name: hlo_sharding.of(i)
          for c in module.computations for i in c.instructions}, module


def _s(text):
  return HloSharding.parse(text)


TILE0 = "{devices=[4,1]<=[4]}"
TILE1 = "{devices=[1,4]<=[4]}"
TILE01 = "{devices=[2,2]<=[4]}"


def test_elementwise_forward_and_backward():
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={TILE0}
  q = f32[8,4] parameter(1)
  n = f32[8,4] negate(p)
  c = f32[8,4] convert(q)
  ROOT a = f32[8,4] add(n, c), sharding={TILE0}""")
  assert sh["n"] == _s(TILE0)
  assert sh["c"] == _s(TILE0)  # backward from the add
  # An unannotated entry parameter is replicated (no propagation to it).
  assert sh["q"].is_replicated


def test_unknown_output_leaves_propagate_per_output_flag():
  body = f"""
  p = f32[8,4] parameter(0), sharding={TILE0}
  n = f32[8,4] negate(p)
  e = f32[8,4] exponential(p)
  a = f32[8,4] abs(p)
  ROOT t = (f32[8,4], f32[8,4], f32[8,4]) tuple(n, e, a),
    sharding={{{TILE1}, {{unknown}}, {{unknown}}}}"""
  sh, _ = _propagate(
      body, allow_spmd_sharding_propagation_to_output=(False, True, False))
  root = sh["t"].tuple_elements
  assert root[0] == _s(TILE1)  # annotated
  assert root[1] == _s(TILE0)  # left to propagation: from p
  assert root[2].is_replicated  # not allowed to propagate
  assert sh["e"] == _s(TILE0)


def test_uneven_entry_shardings_left_to_propagation_are_replicated():
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={TILE0}
  q = f32[6,4] parameter(1)
  s = f32[6,4] slice(p), slice={{[0:6], [0:4]}}
  c = f32[6,4] custom-call(s), custom_call_target="Sharding",
    sharding={TILE0}
  a = f32[6,4] add(c, q)
  ROOT t = (f32[6,4], f32[6,4]) tuple(a, c)""",
                     allow_spmd_sharding_propagation_to_parameters=(True,),
                     allow_spmd_sharding_propagation_to_output=(True,))
  # Inside, values keep their uneven tiles; what callers hold does not.
  assert sh["a"] == _s(TILE0)
  assert sh["q"].is_replicated
  assert all(x.is_replicated for x in sh["t"].tuple_elements)


def test_manual_goes_through_ops_without_a_rule():
  sh, _ = _propagate("""
  p = f32[8] parameter(0), sharding={devices=[4]<=[4]}
  s = f32[2] custom-call(p), custom_call_target="SPMDFullToShardShape",
    sharding={manual}
  c = f32[] constant(1)
  r = f32[] all-reduce(c), replica_groups={{0,1,2,3}}, to_apply=add
  b = f32[2] broadcast(r), dimensions={}
  ar = f32[2] all-reduce(s), replica_groups={{0,1,2,3}}, to_apply=add
  m = f32[2] multiply(ar, b)
  l = f32[2] custom-call(m), custom_call_target="Sharding", sharding={manual}
  ROOT f = f32[8] custom-call(l), custom_call_target="SPMDShardToFullShape",
    sharding={devices=[4]<=[4]}""", computations=ADD)
  for name in ("c", "r", "b", "ar", "m"):
    assert sh[name].is_manual, name


def test_unspecified_dims_of_a_constraint_take_what_propagation_finds():
  x_rows = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"
  y_cols = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={x_rows}
  m = f32[8,4] multiply(p, p)
  c = f32[8,4] custom-call(m), custom_call_target="Sharding",
    sharding={y_cols}, backend_config="unspecified_dims=[0]"
  d = f32[8,4] custom-call(m), custom_call_target="Sharding",
    sharding={y_cols}
  ROOT t = (f32[8,4], f32[8,4]) tuple(c, d)""",
                     allow_spmd_sharding_propagation_to_output=(True,))
  # Dimension 0 takes "x" from the operand, dimension 1 keeps "y".
  assert sh["c"] == _s("{devices=[2,2]<=[4]}")
  assert sh["d"] == _s(y_cols)  # closed: as annotated


def test_unspecified_dims_before_full_to_shard_stay():
  sh, _ = _propagate("""
  p = f32[8,4] parameter(0), sharding={devices=[2,2]<=[4]}
  c = f32[8,4] custom-call(p), custom_call_target="Sharding",
    sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate},
    backend_config="unspecified_dims=[0,1]"
  s = f32[4,4] custom-call(c), custom_call_target="SPMDFullToShardShape",
    sharding={devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}
  ROOT n = f32[4,4] negate(s)""")
  assert sh["c"] == _s("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")


def test_parameters_take_shardings_when_the_config_allows():
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0)
  ROOT n = f32[8,4] negate(p), sharding={TILE1}""",
                     allow_spmd_sharding_propagation_to_parameters=(True,))
  assert sh["p"] == _s(TILE1)


def test_root_is_replicated_unless_the_config_allows():
  body = f"""
  p = f32[8,4] parameter(0), sharding={TILE1}
  ROOT n = f32[8,4] negate(p)"""
  sh, _ = _propagate(body)
  assert sh["n"].is_replicated
  sh, _ = _propagate(body, allow_spmd_sharding_propagation_to_output=(True,))
  assert sh["n"] == _s(TILE1)


def test_broadcast_both_ways():
  sh, _ = _propagate(f"""
  p = f32[8] parameter(0), sharding={{devices=[4]<=[4]}}
  b = f32[8,6] broadcast(p), dimensions={{0}}
  q = f32[6] parameter(1)
  c = f32[8,6] broadcast(q), dimensions={{1}}
  ROOT a = f32[8,6] add(b, c), sharding={{devices=[2,2]<=[4]}}""")
  assert sh["b"] == _s(TILE0)  # from the operand, more tiles than...
  # ... the backward candidate; c gets the root's sharding, and q the
  # projection of it on dimension 1 (the row tiles become replicas).
  assert sh["c"] == _s("{devices=[2,2]<=[4]}")


def test_broadcast_backward_projects():
  sh, _ = _propagate("""
  q = f32[6] parameter(0)
  ROOT c = f32[8,6] broadcast(q), dimensions={1}""",
                     allow_spmd_sharding_propagation_to_parameters=(True,),
                     header="")
  assert sh["q"].is_replicated  # nothing to project from
  sh, _ = _propagate("""
  q = f32[6] parameter(0)
  c = f32[8,6] broadcast(q), dimensions={1}
  ROOT n = f32[8,6] negate(c), sharding={devices=[2,2]<=[4]}""",
                     allow_spmd_sharding_propagation_to_parameters=(True,))
  assert sh["q"] == _s("{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}")


def test_transpose_permutes_tiles():
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={TILE0}
  ROOT t = f32[4,8] transpose(p), dimensions={{1,0}}""",
                     allow_spmd_sharding_propagation_to_output=(True,))
  assert sh["t"] == _s(TILE1)


@pytest.mark.parametrize("src,dst,s_in,s_out", [
    ("f32[8,4]", "f32[2,4,4]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
     "{devices=[2,1,1,2]<=[4] last_tile_dim_replicate}"),
    ("f32[2,4,4]", "f32[8,4]", "{devices=[2,2,1]<=[4]}",
     "{devices=[4,1]<=[4]}"),
])
def test_reshape_splits_and_merges(src, dst, s_in, s_out):
  sh, _ = _propagate(f"""
  p = {src} parameter(0), sharding={s_in}
  ROOT r = {dst} reshape(p)""", allow_spmd_sharding_propagation_to_output=(
      True,))
  assert sh["r"] == _s(s_out)


def test_reshape_that_cuts_tiles_falls_back_to_replicated():
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={TILE1}
  ROOT r = f32[4,8] reshape(p)""", allow_spmd_sharding_propagation_to_output=(
      True,))
  assert sh["r"].is_replicated


def test_reduce_drops_reduced_dims():
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={TILE01}
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(p, z), dimensions={{1}}, to_apply=add""",
                     computations=ADD,
                     allow_spmd_sharding_propagation_to_output=(True,))
  assert sh["r"] == _s("{devices=[2,2]<=[4] last_tile_dim_replicate}")
  assert sh["z"].is_replicated


def test_dot_batch_contracting_and_free_dims():
  sh, _ = _propagate("""
  l = f32[4,8,6] parameter(0), sharding={devices=[2,1,2]<=[4]}
  r = f32[4,6,10] parameter(1), sharding={devices=[2,2,1]<=[4]}
  ROOT d = f32[4,8,10] dot(l, r), lhs_batch_dims={0}, rhs_batch_dims={0},
      lhs_contracting_dims={2}, rhs_contracting_dims={1}""",
                     allow_spmd_sharding_propagation_to_output=(True,))
  # Batch tiles carry over; the contracting tiles become replicas.
  assert sh["d"] == _s(
      "{devices=[2,1,1,2]<=[4] last_tile_dim_replicate}")


def test_dot_backward_from_output():
  sh, _ = _propagate("""
  l = f32[8,6] parameter(0)
  r = f32[6,10] parameter(1)
  ROOT d = f32[8,10] dot(l, r), lhs_contracting_dims={1},
      rhs_contracting_dims={0}, sharding={devices=[2,2]<=[4]}""",
                     allow_spmd_sharding_propagation_to_parameters=(True,))
  assert sh["l"] == _s("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")
  assert sh["r"] == _s(
      "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}")


@pytest.mark.parametrize("op,touched", [
    ("s = f32[8,2] slice(p), slice={[0:8], [1:3]}", 1),
    ("s = f32[8,6] pad(p, z), padding=0_0x1_1", 1),
    ("s = f32[8,8] concatenate(p, p), dimensions={1}", 1),
    ("s = f32[4,4] slice(p), slice={[2:6], [0:4]}", 0),
])
def test_slicing_ops_untile_the_touched_dim(op, touched):
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={TILE01}
  z = f32[] constant(0)
  {op}
  ROOT n = negate(s)""", allow_spmd_sharding_propagation_to_output=(True,))
  s = sh["s"]
  assert s.tile_assignment.dim(touched) == 1
  assert s.tile_assignment.dim(1 - touched) == 2


def test_tuple_and_get_tuple_element():
  sh, module = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={TILE0}
  q = f32[8,4] parameter(1), sharding={TILE1}
  t = (f32[8,4], f32[8,4]) tuple(p, q)
  g = f32[8,4] get-tuple-element(t), index=1
  ROOT n = f32[8,4] negate(g)""", allow_spmd_sharding_propagation_to_output=(
      True,))
  assert sh["t"] == HloSharding.tuple_sharding([_s(TILE0), _s(TILE1)])
  assert sh["n"] == _s(TILE1)


def test_while_body_condition_and_loop_agree():
  comps = ADD + f"""
  cond {{
    c = (s32[], f32[8,4]) parameter(0)
    i = s32[] get-tuple-element(c), index=0
    k = s32[] constant(3)
    ROOT lt = pred[] compare(i, k), direction=LT
  }}
  body {{
    b = (s32[], f32[8,4]) parameter(0)
    i = s32[] get-tuple-element(b), index=0
    one = s32[] constant(1)
    j = s32[] add(i, one)
    x = f32[8,4] get-tuple-element(b), index=1
    y = f32[8,4] multiply(x, x)
    ROOT out = (s32[], f32[8,4]) tuple(j, y)
  }}"""
  sh, module = _propagate(f"""
  p = f32[8,4] parameter(0), sharding={TILE01}
  z = s32[] constant(0)
  t = (s32[], f32[8,4]) tuple(z, p)
  w = (s32[], f32[8,4]) while(t), condition=cond, body=body
  ROOT r = f32[8,4] get-tuple-element(w), index=1""", computations=comps,
                          allow_spmd_sharding_propagation_to_output=(True,))
  want = HloSharding.tuple_sharding([HloSharding.replicate(), _s(TILE01)])
  assert sh["w"] == want
  assert sh["b"] == want and sh["c"] == want and sh["out"] == want
  assert sh["y"] == _s(TILE01)
  assert sh["r"] == _s(TILE01)


def test_sharding_custom_call_is_an_annotation():
  sh, _ = _propagate(f"""
  p = f32[8,4] parameter(0)
  n = f32[8,4] negate(p)
  c = f32[8,4] custom-call(n), custom_call_target="Sharding", sharding={TILE1}
  ROOT e = f32[8,4] exponential(c)""",
                     allow_spmd_sharding_propagation_to_output=(True,))
  assert sh["n"] == _s(TILE1)  # backward through the annotation
  assert sh["e"] == _s(TILE1)
  assert sh["p"].is_replicated


def test_annotations_do_not_change_and_unknown_ops_are_replicated():
  sh, _ = _propagate(f"""
  p = f32[8,8] parameter(0), sharding={TILE0}
  c = f32[8,8] cholesky(p), lower=true
  ROOT n = f32[8,8] negate(c)""",
                     allow_spmd_sharding_propagation_to_output=(True,))
  assert sh["p"] == _s(TILE0)
  # cholesky has no rule: nothing reaches c or, through it, n.
  assert sh["c"].is_replicated and sh["n"].is_replicated
  sh, _ = _propagate(f"""
  p = f32[8,8] parameter(0), sharding={TILE0}
  c = f32[8,8] cholesky(p), lower=true
  ROOT n = f32[8,8] negate(c), sharding={TILE1}""")
  # The annotations stay; c takes its user's sharding (backward).
  assert sh["p"] == _s(TILE0) and sh["n"] == _s(TILE1)
  assert sh["c"] == _s(TILE1)


def test_more_specific_candidate_wins_and_result_is_deterministic():
  body = f"""
  p = f32[8,4] parameter(0), sharding={TILE0}
  q = f32[8,4] parameter(1), sharding={TILE01}
  ROOT a = f32[8,4] add(p, q)"""
  first, _ = _propagate(body, allow_spmd_sharding_propagation_to_output=(
      True,))
  # Equal tile counts: the first operand wins; TILE0 and TILE01 both have
  # 4 tiles.
  assert first["a"] == _s(TILE0)
  again, _ = _propagate(body, allow_spmd_sharding_propagation_to_output=(
      True,))
  assert again == first


def test_manual_region_from_jax():
  sh, _ = _propagate("""
  a = f32[8,4] parameter(0)
  s = f32[8,4] custom-call(a), custom_call_target="Sharding",
      sharding={devices=[2,2]<=[4]}
  m = f32[4,2] custom-call(s), custom_call_target="SPMDFullToShardShape",
      sharding={manual}
  c = f32[4,2] call(m), to_apply=body
  ROOT f = f32[8,4] custom-call(c), custom_call_target="SPMDShardToFullShape",
      sharding={devices=[2,2]<=[4]}""", computations="""
  body {
    x = f32[4,2] parameter(0)
    ROOT y = f32[4,2] negate(x)
  }""")
  assert sh["x"].is_manual and sh["y"].is_manual and sh["c"].is_manual
  assert sh["a"].is_replicated


def test_an_unreduced_constraint_is_its_contractions_sharding():
  module = hlo_parser.parse_and_return_unverified_module("""HloModule m
ENTRY e {
  x = f32[2,2] parameter(0), sharding={devices=[1,2]<=[2]}
  y = f32[2,2] parameter(1), sharding={devices=[2,1]<=[2]}
  d = f32[2,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT c = f32[2,2] custom-call(d), custom_call_target="Sharding", sharding={unreduced}
}
""")
  sp.ShardingPropagation(2).run(module)
  dot = module.entry_computation.root_instruction.operand(0)
  assert str(hlo_sharding.of(dot)) == "{unreduced}"


def test_convolution_keeps_batch_and_spatial_tiling():
  # Forward from the input (its feature dim is contracted, so untiled),
  # backward from a user; the kernel is left replicated.
  sh, _ = _propagate("""
  x = f32[4,16,3] parameter(0), sharding={devices=[2,2,1]<=[4]}
  k = f32[3,3,5] parameter(1)
  c = f32[4,16,5] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f
  y = f32[4,16,3] parameter(2)
  d = f32[4,16,5] convolution(y, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f
  n = f32[4,16,5] negate(d), sharding={devices=[1,4,1]<=[4]}
  ROOT t = (f32[4,16,5], f32[4,16,5]) tuple(c, n)""",
      allow_spmd_sharding_propagation_to_parameters=[False, False, True])
  assert sh["c"] == _s("{devices=[2,2,1]<=[4]}")
  assert sh["d"] == _s("{devices=[1,4,1]<=[4]}")
  assert sh["y"] == _s("{devices=[1,4,1]<=[4]}")
  assert sh["k"].is_replicated


def test_reduce_window_keeps_its_operand_tiling():
  sh, _ = _propagate(f"""
  x = f32[8,16] parameter(0), sharding={TILE1}
  i = f32[] constant(0)
  r = f32[8,8] reduce-window(x, i), window={{size=1x2 stride=1x2}}, to_apply=add
  ROOT n = f32[8,8] negate(r)""", computations=ADD)
  assert sh["r"] == _s(TILE1)
  assert sh["i"].is_replicated


def test_convolution_window_spanning_tiles_does_not_split_output():
  # A kernel gradient: the window (16 rows) spans the 4-row tiles.
  sh, _ = _propagate("""
  x = f32[2,16,3] parameter(0), sharding={devices=[1,4,1]<=[4]}
  dy = f32[2,16,5] parameter(1), sharding={devices=[1,4,1]<=[4]}
  g = f32[3,3,5] convolution(x, dy), window={size=16 pad=1_1}, dim_labels=f0b_i0o->0bf
  ROOT n = f32[3,3,5] negate(g)""")
  assert sh["g"].is_replicated
