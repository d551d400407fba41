"""Tests for the HLO evaluator: elementwise math with XLA's semantics,
control flow, custom calls, constant folding and opcode coverage."""

import ml_dtypes
import numpy as np
import pytest

import support
from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.ir import hlo_opcode
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser


def parse(text):
  return hlo_parser.parse_and_return_unverified_module(text)


def run(text, *args, **kwargs):
  return hlo_evaluator.HloEvaluator(**kwargs).evaluate(parse(text), list(args))


def unary(op, ty, x, extra=""):
  text = f"""HloModule m
ENTRY e {{
  p = {ty}[{len(x)}] parameter(0)
  ROOT r = {ty}[{len(x)}] {op}(p){extra}
}}"""
  return run(text, np.asarray(x))[0]


def binary(op, ty, x, y, out_ty=None, extra=""):
  out_ty = out_ty or ty
  n = len(x)
  text = f"""HloModule m
ENTRY e {{
  a = {ty}[{n}] parameter(0)
  b = {ty}[{n}] parameter(1)
  ROOT r = {out_ty}[{n}] {op}(a, b){extra}
}}"""
  return run(text, np.asarray(x), np.asarray(y))[0]


def test_integer_division_by_zero_and_overflow():
  x = np.array([7, -7, 5, -2147483648], np.int32)
  y = np.array([0, 2, -2, -1], np.int32)
  np.testing.assert_array_equal(binary("divide", "s32", x, y),
                                [-1, -3, -2, -2147483648])
  np.testing.assert_array_equal(binary("remainder", "s32", x, y),
                                [7, -1, 1, 0])
  u = np.array([9, 9], np.uint8)
  np.testing.assert_array_equal(
      binary("divide", "u8", u, np.array([0, 2], np.uint8)), [255, 4])


def test_integer_wraparound():
  x = np.array([127, -128], np.int8)
  np.testing.assert_array_equal(binary("add", "s8", x, np.int8([1, -1])),
                                [-128, 127])
  np.testing.assert_array_equal(binary("multiply", "s8", x, np.int8([2, 2])),
                                [-2, 0])
  np.testing.assert_array_equal(unary("negate", "s8", np.int8([-128, 3])),
                                [-128, -3])


def test_float_to_int_saturates_and_nan_is_zero():
  text = """HloModule m
ENTRY e {
  p = f32[5] parameter(0)
  ROOT c = s8[5] convert(p)
}"""
  x = np.array([np.nan, 1e10, -1e10, -3.7, 3.7], np.float32)
  np.testing.assert_array_equal(run(text, x)[0], [0, 127, -128, -3, 3])


def test_max_min_propagate_nan():
  x = np.array([np.nan, 1.0, -0.0], np.float32)
  y = np.array([1.0, np.nan, 0.0], np.float32)
  mx = binary("maximum", "f32", x, y)
  mn = binary("minimum", "f32", x, y)
  assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()
  assert not np.signbit(mx[2]) and np.signbit(mn[2])


def test_compare_directions_and_total_order():
  x = np.array([1.0, 2.0, np.nan, -0.0], np.float32)
  y = np.array([2.0, 2.0, np.nan, 0.0], np.float32)
  lt = binary("compare", "f32", x, y, "pred", ", direction=LT")
  np.testing.assert_array_equal(lt, [True, False, False, False])
  eq = binary("compare", "f32", x, y, "pred", ", direction=EQ")
  np.testing.assert_array_equal(eq, [False, True, False, True])
  lt_total = binary("compare", "f32", x, y, "pred",
                    ", direction=LT, type=TOTALORDER")
  np.testing.assert_array_equal(lt_total, [True, False, False, True])
  ux = np.array([1, 200], np.uint8)
  uy = np.array([2, 3], np.uint8)
  np.testing.assert_array_equal(
      binary("compare", "u8", ux, uy, "pred", ", direction=GT"),
      [False, True])


def test_shifts_clz_popcnt():
  x = np.array([1, -8, 255, 0], np.int32)
  s = np.array([4, 1, 40, 3], np.int32)
  np.testing.assert_array_equal(binary("shift-left", "s32", x, s),
                                [16, -16, 0, 0])
  np.testing.assert_array_equal(
      binary("shift-right-arithmetic", "s32", x, s), [0, -4, 0, 0])
  np.testing.assert_array_equal(
      binary("shift-right-logical", "s32", x, s),
      [0, np.int32(np.uint32(2**32 - 8) >> 1), 0, 0])
  np.testing.assert_array_equal(unary("count-leading-zeros", "s32", x),
                                [31, 0, 24, 32])
  np.testing.assert_array_equal(unary("popcnt", "s32", x), [1, 29, 8, 0])


def test_transcendentals_match_numpy():
  x = np.array([0.1, 0.5, 0.9, 2.0], np.float32)
  x64 = x.astype(np.float64)
  cases = {
      "exponential": np.exp(x64), "log": np.log(x64), "tanh": np.tanh(x64),
      "rsqrt": 1 / np.sqrt(x64), "cbrt": np.cbrt(x64),
      "exponential-minus-one": np.expm1(x64),
      "log-plus-one": np.log1p(x64), "logistic": 1 / (1 + np.exp(-x64)),
      "tan": np.tan(x64), "sine": np.sin(x64), "cosine": np.cos(x64),
      "sqrt": np.sqrt(x64),
  }
  for op, want in cases.items():
    np.testing.assert_allclose(unary(op, "f32", x), want, rtol=1e-6,
                               err_msg=op)
  erf = unary("erf", "f64", np.array([0.0, 0.5, 1.0, -2.0]))
  np.testing.assert_allclose(
      erf, [0.0, 0.5204998778130465, 0.8427007929497149,
            -0.9953222650189527], rtol=1e-12)


def test_binary_float_math():
  y = np.array([1.0, -1.0, 2.0], np.float32)
  x = np.array([1.0, 1.0, -3.0], np.float32)
  np.testing.assert_allclose(binary("atan2", "f32", y, x),
                             np.arctan2(y, x), rtol=1e-6)
  np.testing.assert_allclose(binary("power", "f32", x, y),
                             [1.0, 1.0, 9.0])
  np.testing.assert_allclose(binary("remainder", "f32", np.float32(
      [5.5, -5.5, 1.0]), np.float32([2.0, 2.0, 0.5])), [1.5, -1.5, 0.0])


def test_rounding_and_is_finite():
  x = np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)
  np.testing.assert_array_equal(unary("round-nearest-afz", "f32", x),
                                [1, 2, 3, -1, -3])
  np.testing.assert_array_equal(unary("round-nearest-even", "f32", x),
                                [0, 2, 2, -0.0, -2])
  text = """HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  ROOT r = pred[3] is-finite(p)
}"""
  np.testing.assert_array_equal(
      run(text, np.float32([1.0, np.inf, np.nan]))[0], [True, False, False])


def test_bf16_and_bitcast_convert_and_reduce_precision():
  x = np.array([1.0, 3.0], ml_dtypes.bfloat16)
  r = binary("add", "bf16", x, x)
  assert r.dtype == ml_dtypes.bfloat16
  np.testing.assert_array_equal(r.astype(np.float32), [2.0, 6.0])
  text = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = u32[2] bitcast-convert(p)
}"""
  np.testing.assert_array_equal(run(text, np.float32([1.0, -2.0]))[0],
                                [0x3F800000, 0xC0000000])
  rp = unary("reduce-precision", "f32", np.float32([1.0 + 2**-20, 3.0]),
             ", exponent_bits=8, mantissa_bits=7")
  np.testing.assert_array_equal(rp, [1.0, 3.0])


def test_select_clamp_and_scalar_broadcast_constants():
  text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  c = f32[4] clamp(lo, p, hi)
  z = f32[4] broadcast(lo), dimensions={}
  m = pred[4] compare(p, z), direction=GT
  ROOT s = f32[4] select(m, c, z)
}"""
  out = run(text, np.float32([-5, 0.5, 5, -1]))[0]
  np.testing.assert_array_equal(out, [-1, 0.5, 1, -1])


WHILE = """HloModule m
cond {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  two = f32[] constant(2)
  i2 = s32[] add(i, one)
  x2 = f32[] multiply(x, two)
  ROOT t = (s32[], f32[]) tuple(i2, x2)
}
ENTRY e {
  x = f32[] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[]) tuple(z, x)
  ROOT w = (s32[], f32[]) while(t), condition=cond, body=body
}"""


def test_while_loop_and_tuple_flattening():
  i, x = run(WHILE, np.float32(3))
  assert int(i) == 5 and float(x) == 3 * 32


def test_while_iteration_limit():
  with pytest.raises(support.ResourceExhaustedError):
    run(WHILE, np.float32(1), max_loop_iterations=3)


COND = """HloModule m
b0 {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
}
b1 {
  p = f32[] parameter(0)
  ROOT e = f32[] exponential(p)
}
b2 {
  p = f32[] parameter(0)
  ROOT s = f32[] sqrt(p)
}
ENTRY e {
  i = s32[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x, x), branch_computations={b0, b1, b2}
}"""


def test_conditional_index_form_out_of_range_takes_last():
  assert float(run(COND, np.int32(0), np.float32(4))[0]) == -4
  assert float(run(COND, np.int32(2), np.float32(4))[0]) == 2
  assert float(run(COND, np.int32(7), np.float32(4))[0]) == 2
  assert float(run(COND, np.int32(-1), np.float32(4))[0]) == 2


def test_conditional_pred_form():
  text = COND.replace("ENTRY e {", "ENTRY e {\n  q = pred[] parameter(2)")
  text = text.replace(
      "ROOT c = f32[] conditional(i, x, x, x), branch_computations={b0, b1, "
      "b2}", "ROOT c = f32[] conditional(q, x, x), true_computation=b0, "
      "false_computation=b2")
  assert float(run(text, np.int32(0), np.float32(9), np.bool_(True))[0]) == -9
  assert float(run(text, np.int32(0), np.float32(9), np.bool_(False))[0]) == 3


def test_call_map_and_fusion():
  text = """HloModule m
sq {
  p = f32[] parameter(0)
  ROOT m = f32[] multiply(p, p)
}
sq2 {
  p = f32[3] parameter(0)
  ROOT n = f32[3] negate(p)
}
fused {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT s = f32[3] subtract(a, b)
}
ENTRY e {
  x = f32[3] parameter(0)
  y = f32[3] map(x), dimensions={0}, to_apply=sq
  c = f32[3] call(y), to_apply=sq2
  ROOT f = f32[3] fusion(c, x), kind=kLoop, calls=fused
}"""
  out = run(text, np.float32([1, 2, 3]))[0]
  np.testing.assert_array_equal(out, [-2, -6, -12])


def test_custom_call_handlers():
  text = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT c = f32[2] custom-call(p), custom_call_target="twice"
}"""
  out = run(text, np.float32([1, 2]),
            custom_calls={"twice": lambda instr, ops: ops[0] * 2})
  np.testing.assert_array_equal(out[0], [2, 4])
  with pytest.raises(support.UnimplementedError, match="twice"):
    run(text, np.float32([1, 2]))


def test_unimplemented_opcode_is_named():
  text = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] rng(p, p), distribution=rng_uniform
}"""
  with pytest.raises(support.UnimplementedError, match="rng"):
    run(text, np.float32([0, 1]))


def test_evaluate_constant_expression():
  m = parse("""HloModule m
ENTRY e {
  a = s32[2] constant({3, 4})
  b = s32[2] constant({10, 20})
  c = s32[2] multiply(a, b)
  p = s32[2] parameter(0)
  ROOT d = s32[2] add(c, p)
}""")
  comp = m.entry_computation
  c = comp.get_instruction_with_name("c")
  lit = hlo_evaluator.evaluate_constant_expression(c)
  np.testing.assert_array_equal(lit.array, [30, 80])
  assert hlo_evaluator.evaluate_constant_expression(comp.root_instruction) is (
      None)


def test_partition_and_replica_id_are_zero():
  text = """HloModule m
ENTRY e {
  a = u32[] partition-id()
  b = u32[] replica-id()
  ROOT t = (u32[], u32[]) tuple(a, b)
}"""
  assert [int(v) for v in run(text)] == [0, 0]


def test_opcode_coverage():
  """Lists which opcodes the evaluator implements; the StableHLO-reachable
  set must be covered."""
  done = hlo_evaluator.implemented_opcodes()
  missing = sorted(op.value for op in HloOpcode if op not in done)
  print("implemented:", len(done), "of", len(HloOpcode))
  print("not implemented:", ", ".join(missing))
  required = {
      "abs", "add", "and", "atan2", "bitcast-convert", "broadcast", "call",
      "cbrt", "ceil", "cholesky", "clamp", "compare", "concatenate",
      "conditional", "constant", "convert", "convolution", "cosine",
      "count-leading-zeros", "custom-call", "divide", "dot", "dynamic-slice",
      "dynamic-update-slice", "erf", "exponential", "exponential-minus-one",
      "fft", "floor", "fusion", "gather", "get-tuple-element", "iota",
      "is-finite", "log", "log-plus-one", "logistic", "map", "maximum",
      "minimum", "multiply", "negate", "not", "opt-barrier", "or", "pad",
      "parameter", "partition-id", "popcnt", "power", "reduce",
      "reduce-precision", "reduce-window", "remainder", "replica-id",
      "reshape", "reverse", "rng-bit-generator", "round-nearest-afz",
      "round-nearest-even", "rsqrt", "scatter", "select",
      "select-and-scatter", "shift-left", "shift-right-arithmetic",
      "shift-right-logical", "sign", "sine", "slice", "sort", "sqrt",
      "subtract", "tan", "tanh", "transpose", "triangular-solve", "tuple",
      "while", "xor", "after-all", "real", "imag", "complex",
  }
  names = {op.value for op in done}
  assert required <= names, sorted(required - names)
  for op in done:
    assert hlo_opcode.is_opcode_name(op.value)


def test_async_and_copy_start_pairs():
  text = """HloModule m
neg {
  x = f32[2] parameter(0)
  ROOT n = f32[2] negate(x)
}
ENTRY e {
  p = f32[2] parameter(0)
  s = ((f32[2]), f32[2], s32[]) async-start(p), calls=neg
  u = ((f32[2]), f32[2], s32[]) async-update(s)
  d = f32[2] async-done(u)
  c = (f32[2], f32[2], u32[]) copy-start(d)
  ROOT r = f32[2] copy-done(c)
}"""
  np.testing.assert_array_equal(run(text, np.float32([1, -2]))[0], [-1, 2])
