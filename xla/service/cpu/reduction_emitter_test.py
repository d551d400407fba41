"""Reduction kernels (row / column / middle / full, vectorized and scalar
paths, variadic, fused inputs, multi-output fusions) against the HLO
evaluator."""

import numpy as np
import pytest

from xla.service.cpu import cpu_testing as ct
from xla.service.cpu import reduction_emitter

_ADD_F32 = """
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b) }
"""


# Argmax over (value, index) pairs, the lower index winning ties.
_AMAX = """
amax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  v = f32[] select(take, a, b)
  i = s32[] select(take, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
"""


def _reduce_module(dims, reduced, et="f32", op="add", init="0",
                   prologue=""):
  out = [d for i, d in enumerate(dims) if i not in reduced]
  shape = ",".join(map(str, dims))
  oshape = ",".join(map(str, out))
  rd = ",".join(map(str, reduced))
  return f"""
HloModule m
red {{ a = {et}[] parameter(0)
  b = {et}[] parameter(1)
  ROOT c = {et}[] {op}(a, b) }}
ENTRY e {{
  x = {et}[{shape}] parameter(0)
  z = {et}[] constant({init})
  {prologue}
  ROOT r = {et}[{oshape}] reduce(x, z), dimensions={{{rd}}}, to_apply=red
}}"""


@pytest.mark.parametrize("dims,reduced", [
    ((37, 1000), (1,)),      # row, vector path
    ((37, 30), (1,)),        # row, short rows: scalar path
    ((37, 65), (1,)),        # row, short tile and a scalar remainder
    ((37, 96), (1,)),        # row, short tile
    ((37, 1500), (0,)),      # column, blocked
    ((5, 7, 300), (1,)),     # middle dimension
    ((6, 5, 40), (0, 2)),    # non-adjacent, last reduced
    ((30, 1000), (0, 1)),    # full reduction
    ((4, 1, 300), (2,)),
    ((300, 1), (0,)),        # last dim size 1
    ((3, 4), ()),            # no reduced dimensions
    ((0, 5), (0,)),          # empty input: init only
    ((5, 0), (0,)),          # empty output
])
def test_sum_shapes(dims, reduced):
  ct.run_and_compare(_reduce_module(dims, reduced, init="0.5"), rtol=1e-4,
                     atol=1e-4)


@pytest.mark.parametrize("et,op,init", [
    ("f32", "maximum", "-inf"), ("f32", "minimum", "inf"),
    ("f64", "multiply", "1"), ("s32", "add", "3"), ("s32", "maximum", "-7"),
    ("u8", "add", "0"), ("s64", "multiply", "1"), ("u32", "minimum", "9"),
    ("pred", "or", "false"), ("bf16", "add", "0"), ("f16", "maximum", "-inf"),
    ("s16", "xor", "0"), ("s32", "and", "-1"),
])
def test_types_and_ops(et, op, init):
  for dims, red in (((9, 600), (1,)), ((600, 9), (0,))):
    text = _reduce_module(dims, red, et, op, init)
    module = ct.parse(text)
    args = ct.random_args(module, 1)
    if et in ("bf16", "f16"):
      # Integer values keep every partial sum exact, whatever the order.
      args = [np.round(args[0] * 2).astype(args[0].dtype)]
    if op == "multiply" and et.startswith("f"):
      args = [np.ones_like(args[0]) + args[0] * np.asarray(1e-3, args[0].dtype)]
    ct.run_and_compare(text, args, rtol=1e-4, atol=1e-3)


def test_complex_sum_rows_and_columns():
  text = """
HloModule m
add { a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT c = c64[] add(a, b) }
ENTRY e {
  x = c64[5,300] parameter(0)
  z = c64[] constant((0.5, 1))
  r = c64[5] reduce(x, z), dimensions={1}, to_apply=add
  c = c64[300] reduce(x, z), dimensions={0}, to_apply=add
  ROOT t = (c64[5], c64[300]) tuple(r, c)
}"""
  ct.run_and_compare(text, rtol=1e-4, atol=1e-4)


def test_nan_propagates_in_vector_max():
  text = _reduce_module((2, 800), (1,), "f32", "maximum", "-inf")
  x = np.random.default_rng(0).standard_normal((2, 800)).astype(np.float32)
  x[0, 517] = np.nan
  _, (out,) = ct.run_and_compare(text, [x])
  assert np.isnan(out[0]) and not np.isnan(out[1])


def test_argmax_variadic():
  text = "\nHloModule m\n" + _AMAX + """ENTRY e {
  x = f32[20,300] parameter(0)
  io = s32[20,300] iota(), iota_dimension=1
  z = f32[] constant(-inf)
  zi = s32[] constant(0)
  r = (f32[20], s32[20]) reduce(x, io, z, zi), dimensions={1}, to_apply=amax
  c = (f32[300], s32[300]) reduce(x, io, z, zi), dimensions={0}, to_apply=amax
  r1 = s32[20] get-tuple-element(r), index=1
  c0 = f32[300] get-tuple-element(c), index=0
  ROOT t = (s32[20], f32[300]) tuple(r1, c0)
}"""
  ct.run_and_compare(text)


def test_fused_input_and_sibling_multi_output():
  # sum(x*y) and sum(x) over the same rows plus max over columns: the
  # pipeline builds input fusions and a multi-output fusion.
  text = """
HloModule m
""" + _ADD_F32 + """
mx { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b) }
ENTRY e {
  x = f32[64,513] parameter(0)
  y = f32[64,513] parameter(1)
  z = f32[] constant(0)
  xy = f32[64,513] multiply(x, y)
  e = f32[64,513] exponential(xy)
  sa = f32[64] reduce(xy, z), dimensions={1}, to_apply=add
  sb = f32[64] reduce(x, z), dimensions={1}, to_apply=add
  m = f32[513] reduce(e, z), dimensions={0}, to_apply=mx
  ROOT t = (f32[64], f32[64], f32[513], f32[64,513]) tuple(sa, sb, m, e)
}"""
  exe, _ = ct.run_and_compare(text, rtol=1e-4, atol=1e-4)
  hlo = exe.module.to_string()
  assert "kind=kInput" in hlo


def test_softmax_pattern():
  text = """
HloModule m
""" + _ADD_F32 + """
mx { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b) }
ENTRY e {
  x = f32[33,1025] parameter(0)
  ninf = f32[] constant(-inf)
  z = f32[] constant(0)
  m = f32[33] reduce(x, ninf), dimensions={1}, to_apply=mx
  mb = f32[33,1025] broadcast(m), dimensions={0}
  d = f32[33,1025] subtract(x, mb)
  e = f32[33,1025] exponential(d)
  s = f32[33] reduce(e, z), dimensions={1}, to_apply=add
  sb = f32[33,1025] broadcast(s), dimensions={0}
  ROOT r = f32[33,1025] divide(e, sb)
}"""
  ct.run_and_compare(text, rtol=1e-5)


@pytest.mark.parametrize("rows,row", [(300, 3), (50, 10), (7, 32),
                                      (2, 1), (5, 0)])
def test_short_rows_with_fused_producers(rows, row):
  # Gumbel-argmax (categorical sampling) and a sum with an elementwise
  # output: the short-row path's tiles, the multi-output store and the
  # variadic fold.
  text = "\nHloModule m\n" + _AMAX + f"""
add {{ a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b) }}
ENTRY e {{
  x = f32[{rows},{row}] parameter(0)
  l = f32[{rows},{row}] log(x)
  g = f32[{rows},{row}] negate(l)
  io = s32[{rows},{row}] iota(), iota_dimension=1
  z = f32[] constant(-inf)
  zi = s32[] constant(0)
  r = (f32[{rows}], s32[{rows}]) reduce(g, io, z, zi), dimensions={{1}}, to_apply=amax
  zero = f32[] constant(0)
  s = f32[{rows}] reduce(l, zero), dimensions={{1}}, to_apply=add
  r1 = s32[{rows}] get-tuple-element(r), index=1
  ROOT t = (s32[{rows}], f32[{rows}], f32[{rows},{row}]) tuple(r1, s, g)
}}"""
  x = np.random.default_rng(3).random((rows, row)).astype(np.float32) + 0.1
  ct.run_and_compare(text, [x], rtol=1e-5, atol=1e-5)


def test_reduce_with_call_in_reducer_uses_scalar_path():
  text = """
HloModule m
inner { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b) }
red { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] call(a, b), to_apply=inner }
ENTRY e {
  x = f32[8,100] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(x, z), dimensions={1}, to_apply=red
}"""
  ct.run_and_compare(text, rtol=1e-5)


def test_row_tiles():
  assert reduction_emitter.row_tile(1000, [8]) == 128
  assert reduction_emitter.row_tile(65, [8]) == 64
  assert reduction_emitter.row_tile(96, [8]) == 96
  assert reduction_emitter.row_tile(31, [8]) == 0
  assert reduction_emitter.row_tile(65, [16]) == 64
  assert reduction_emitter.row_tile(63, [16]) == 0
  assert reduction_emitter.row_tile(100, [4, 8]) == 96


@pytest.mark.parametrize("row", [33, 65, 130])
def test_softmax_rows_of_short_tiles(row):
  text = f"""
HloModule m
mx {{ a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b) }}
add {{ a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b) }}
ENTRY e {{
  x = f32[16,{row}] parameter(0)
  ninf = f32[] constant(-inf)
  zero = f32[] constant(0)
  m = f32[16] reduce(x, ninf), dimensions={{1}}, to_apply=mx
  mb = f32[16,{row}] broadcast(m), dimensions={{0}}
  d = f32[16,{row}] subtract(x, mb)
  ex = f32[16,{row}] exponential(d)
  s = f32[16] reduce(ex, zero), dimensions={{1}}, to_apply=add
  sb = f32[16,{row}] broadcast(s), dimensions={{0}}
  ROOT y = f32[16,{row}] divide(ex, sb)
}}"""
  ct.run_and_compare(text, rtol=1e-5, atol=1e-6)


def test_vector_reducer_detection():
  module = ct.parse(_reduce_module((4, 4), (1,), "f32", "add"))
  r = module.entry_computation.root_instruction
  op, ident = reduction_emitter.vector_reducer(r)
  assert op.opcode.value == "add" and ident == 0.0
  module = ct.parse(_reduce_module((4, 4), (1,), "s32", "maximum"))
  _, ident = reduction_emitter.vector_reducer(
      module.entry_computation.root_instruction)
  assert ident == -(1 << 31)
  module = ct.parse(_reduce_module((4, 4), (1,), "f32", "subtract"))
  assert reduction_emitter.vector_reducer(
      module.entry_computation.root_instruction) is None


@pytest.mark.parametrize("dims,reduced,et,op,init", [
    ((1024, 1024), (0, 1), "f32", "add", "0.5"),
    ((1 << 20,), (0,), "f32", "maximum", "-inf"),
    ((2, 512, 1024), (1, 2), "s32", "add", "7"),
    ((1 << 20,), (0,), "u32", "and", "4294967295"),
])
def test_large_small_output_reductions_are_split(dims, reduced, et, op, init):
  text = _reduce_module(dims, reduced, et, op, init)
  module = ct.parse(text)
  args = ct.random_args(module, 2)
  if et == "f32":
    args = [np.round(args[0] * 4)]  # exact partial sums in any order
  exe, _ = ct.run_and_compare(text, args)
  reduces = [t for t in exe.plan["thunks"] if t["kind"] == "kernel"]
  assert len(reduces) == 2 and reduces[0]["extent"] > 1


@pytest.mark.parametrize("rows,row", [(300, 3), (129, 5), (64, 7), (40, 6)])
def test_short_rows_indexed_by_position(rows, row):
  # Logits broadcast along the rows and an iota (categorical sampling):
  # the unrolled fill, with a 2-D kept shape and an elementwise output.
  text = "\nHloModule m\n" + _AMAX + f"""
ENTRY e {{
  x = f32[2,{rows},{row}] parameter(0)
  c = f32[{row}] parameter(1)
  l = f32[2,{rows},{row}] log(x)
  n = f32[2,{rows},{row}] negate(l)
  g = f32[2,{rows},{row}] log(n)
  cb = f32[2,{rows},{row}] broadcast(c), dimensions={{2}}
  s = f32[2,{rows},{row}] subtract(cb, g)
  io = s32[2,{rows},{row}] iota(), iota_dimension=2
  z = f32[] constant(-inf)
  zi = s32[] constant(0)
  r = (f32[2,{rows}], s32[2,{rows}]) reduce(s, io, z, zi), dimensions={{2}}, to_apply=amax
  r1 = s32[2,{rows}] get-tuple-element(r), index=1
  ROOT t = (s32[2,{rows}], f32[2,{rows},{row}]) tuple(r1, s)
}}"""
  rng = np.random.default_rng(5)
  x = rng.uniform(0.05, 0.95, (2, rows, row)).astype(np.float32)
  c = np.log(rng.dirichlet(np.ones(row))).astype(np.float32)
  ct.run_and_compare(text, [x, c], rtol=1e-5, atol=1e-5)


def test_short_rows_indexed_by_position_vectorize(tmp_path):
  # The fill of a Gumbel argmax over 3 classes: LLVM vectorizes its logs.
  # With the flat fill, reading the logits at `t % 3` (a gather) kept the
  # whole loop scalar, 8x slower.
  from xla.service.cpu import cpu_compiler  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import jit  # pylint: disable=g-import-not-at-top
  text = "\nHloModule m\n" + _AMAX + """
ENTRY e {
  x = f32[8192,3] parameter(0)
  l = f32[8192,3] log(x)
  n = f32[8192,3] negate(l)
  g = f32[8192,3] log(n)
  c = f32[3] constant({-0.69, -1.2, -1.6})
  cb = f32[8192,3] broadcast(c), dimensions={1}
  s = f32[8192,3] subtract(cb, g)
  io = s32[8192,3] iota(), iota_dimension=1
  z = f32[] constant(-inf)
  zi = s32[] constant(0)
  ROOT r = (f32[8192], s32[8192]) reduce(s, io, z, zi), dimensions={1}, to_apply=amax
}"""
  cpu_compiler.compile(ct.parse(text), cpu_compiler.CpuCompileOptions(
      dump_to=str(tmp_path), input_key="short-rows-vectorize"))
  code = jit.optimized_text((tmp_path / "m.ir.ll").read_text())
  assert "call <" in code and "@__xla_cpu_lib_math_log_f32_v" in code, code
