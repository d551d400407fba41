"""Tests for reduce, reduce_window, select_and_scatter, sort and top_k.

Expectations come from plain-Python loops over the spec formulas (written
here, independently of the kernels), numpy / jax.lax, or hand computation.
"""

import itertools

import numpy as np
import pytest

from stablehlo._src import text
from stablehlo._src.interpreter import Interpreter
from stablehlo._src.interpreter import corpus_testing
from stablehlo._src.interpreter import kernels_reduce as kr

_ET = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
       np.dtype(np.float16): "f16", np.dtype(np.int32): "i32",
       np.dtype(np.int64): "i64", np.dtype(np.int8): "i8",
       np.dtype(np.uint8): "ui8", np.dtype(np.uint32): "ui32",
       np.dtype(np.bool_): "i1"}


def _ty(shape, dt):
  return "tensor<" + "".join(f"{d}x" for d in shape) + _ET[np.dtype(dt)] + ">"


def _run(src, *args):
  module = text.parse_module(src, "t.mlir")
  return Interpreter(module).run("main", list(args))


def _ints(xs):
  return ", ".join(str(x) for x in xs)


_BODY = {"add": "stablehlo.add", "max": "stablehlo.maximum",
         "min": "stablehlo.minimum", "mul": "stablehlo.multiply",
         "and": "stablehlo.and", "or": "stablehlo.or"}
_PY = {"add": lambda a, b: a + b, "max": max, "min": min,
       "mul": lambda a, b: a * b, "and": lambda a, b: a & b,
       "or": lambda a, b: a | b}


def _reduce_src(shape, dt, dims, body, out_shape):
  st = _ty((), dt)
  return f"""
func.func @main(%x: {_ty(shape, dt)}, %init: {st}) -> {_ty(out_shape, dt)} {{
  %r = stablehlo.reduce(%x init: %init) applies {_BODY[body]} across dimensions = [{_ints(dims)}] : ({_ty(shape, dt)}, {st}) -> {_ty(out_shape, dt)}
  func.return %r : {_ty(out_shape, dt)}
}}
"""


def _fold_reference(x, init, dims, fn):
  """Left-to-right fold over the reduced dims (the order upstream uses)."""
  keep = [d for d in range(x.ndim) if d not in dims]
  out_shape = tuple(x.shape[d] for d in keep)
  out = np.empty(out_shape, dtype=x.dtype)
  for oi in np.ndindex(*out_shape):
    acc = init
    for ri in np.ndindex(*[x.shape[d] for d in sorted(dims)]):
      full = [0] * x.ndim
      for d, i in zip(keep, oi):
        full[d] = i
      for d, i in zip(sorted(dims), ri):
        full[d] = i
      acc = fn(acc, x[tuple(full)])
    out[oi] = acc
  return out


@pytest.mark.parametrize("body", ["add", "max", "min", "mul", "and", "or"])
@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (2, 0), (), (0, 1, 2)])
def test_reduce_int_wraps(body, dims):
  rng = np.random.default_rng(len(dims))
  x = rng.integers(-128, 128, (3, 4, 5)).astype(np.int8)
  init = np.int8({"add": 0, "max": -128, "min": 127, "mul": 1, "and": -1,
                  "or": 0}[body])
  out_shape = tuple(s for d, s in enumerate(x.shape) if d not in dims)
  got, = _run(_reduce_src(x.shape, np.int8, dims, body, out_shape), x,
              np.array(init))
  fn = _PY[body]
  want = _fold_reference(x.astype(np.int64), int(init), dims,
                         lambda a, b: (fn(a, b) + 128) % 256 - 128)
  np.testing.assert_array_equal(got, want.astype(np.int8))


def test_reduce_float_sum_is_sequential_from_init():
  x = np.array([[1e8, 1, 1, 1, 1, -1e8] * 3], dtype=np.float32)
  got, = _run(_reduce_src(x.shape, np.float32, (1,), "add", (1,)), x,
              np.array(np.float32(2.0)))
  acc = np.float32(2.0)
  for v in x[0]:
    acc = np.float32(acc + v)
  np.testing.assert_array_equal(got, [acc])


def test_reduce_float16_sum_rounds_each_step():
  x = np.full((1, 40), 1, dtype=np.float16)
  got, = _run(_reduce_src(x.shape, np.float16, (1,), "add", (1,)), x,
              np.array(np.float16(2048)))
  # 2048 + 1 rounds back to 2048 in f16 at every step.
  np.testing.assert_array_equal(got, [2048])


def test_reduce_max_nan_and_signed_zero():
  x = np.array([[-0.0, 0.0, -0.0], [1.0, np.nan, 2.0], [-0.0, -0.0, -0.0]],
               dtype=np.float32)
  got, = _run(_reduce_src(x.shape, np.float32, (1,), "max", (3,)), x,
              np.array(np.float32(-np.inf)))
  assert got[0] == 0 and not np.signbit(got[0])
  assert np.isnan(got[1])
  assert got[2] == 0 and np.signbit(got[2])


def test_reduce_empty_dimension_gives_init():
  x = np.zeros((3, 0), dtype=np.float32)
  got, = _run(_reduce_src(x.shape, np.float32, (1,), "max", (3,)), x,
              np.array(np.float32(7)))
  np.testing.assert_array_equal(got, [7, 7, 7])


def _narrow_types():
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  return {"bf16": ml_dtypes.bfloat16, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
          "f16": np.float16, "i4": ml_dtypes.int4, "ui4": ml_dtypes.uint4,
          "i2": ml_dtypes.int2, "i1": np.bool_, "complex<f32>": np.complex64}


def _step(et, body, acc, v):
  """One body application on scalars, rounded / wrapped like the type."""
  if et == "i1":
    return {"add": acc | v, "max": acc | v, "mul": acc & v}[body]
  if et in ("i4", "ui4", "i2"):
    bits = 2 if et == "i2" else 4
    a, b = int(acc), int(v)
    r = {"add": a + b, "max": max(a, b), "mul": a * b}[body] & ((1 << bits) - 1)
    if not et.startswith("u") and r >= 1 << (bits - 1):
      r -= 1 << bits
    return type(acc)(r)
  return {"add": lambda: acc + v, "max": lambda: np.maximum(acc, v),
          "mul": lambda: acc * v}[body]()


@pytest.mark.parametrize("et,body", [
    (et, body) for et in ("bf16", "f8E4M3FN", "f16", "i4", "ui4", "i2", "i1",
                          "complex<f32>")
    for body in ("add", "max", "mul")
    if not (et.startswith("complex") and body == "max")])
def test_reduce_element_types(et, body):
  dt = _narrow_types()[et]
  rng = np.random.default_rng(7)
  if et == "i1":
    x = rng.integers(0, 2, (3, 9)).astype(bool)
  elif et in ("i4", "i2", "ui4"):
    x = rng.integers(0 if et == "ui4" else -2, 2, (3, 9)).astype(dt)
  elif et.startswith("complex"):
    x = (rng.standard_normal((3, 9)) + 1j * rng.standard_normal((3, 9)))
    x = x.astype(dt)
  else:
    x = (rng.standard_normal((3, 9)) * 3).astype(dt)
  init = np.array(x[0, 0])
  src = f"""
func.func @main(%x: tensor<3x9x{et}>, %i: tensor<{et}>) -> tensor<3x{et}> {{
  %r = stablehlo.reduce(%x init: %i) applies {_BODY[body]} across dimensions = [1] : (tensor<3x9x{et}>, tensor<{et}>) -> tensor<3x{et}>
  func.return %r : tensor<3x{et}>
}}
"""
  got, = _run(src, x, init)
  want = []
  for row in x:
    acc = init[()]
    for v in row:
      acc = _step(et, body, acc, v)
    want.append(acc)
  want = np.array(want, dtype=dt)
  assert got.dtype == want.dtype
  as_wide = np.complex128 if et.startswith("complex") else np.float64
  np.testing.assert_array_equal(got.astype(as_wide), want.astype(as_wide))


_ARGMAX_SRC = """
func.func @main(%x: tensor<4x{n}xf32>) -> (tensor<4xf32>, tensor<4xi32>) {{
  %iota = stablehlo.iota dim = 1 : tensor<4x{n}xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %ninf), (%iota init: %zero) across dimensions = [1] : (tensor<4x{n}xf32>, tensor<4x{n}xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%ai: tensor<i32>, %bi: tensor<i32>) {{
    %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %lt = stablehlo.compare LT, %ai, %bi, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %pick = stablehlo.or %gt, %tie : tensor<i1>
    %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
    %i = stablehlo.select %pick, %ai, %bi : tensor<i1>, tensor<i32>
    stablehlo.return %v, %i : tensor<f32>, tensor<i32>
  }}
  func.return %r#0, %r#1 : tensor<4xf32>, tensor<4xi32>
}}
"""


@pytest.mark.parametrize("n", [1, 5, 33, 100])
def test_variadic_argmax_reduce(n):
  rng = np.random.default_rng(n)
  x = rng.integers(0, 6, (4, n)).astype(np.float32)  # many ties
  vals, idx = _run(_ARGMAX_SRC.format(n=n), x)
  np.testing.assert_array_equal(vals, x.max(axis=1))
  np.testing.assert_array_equal(idx, np.argmax(x, axis=1))  # first max


def test_variadic_sum_and_product_tree_fold():
  # Not a single-op body, so it folds generically (a tree for 40 elements);
  # integer add / multiply are exact in any order.
  src = """
func.func @main(%x: tensor<3x40xi64>, %y: tensor<3x40xi64>) -> (tensor<3xi64>, tensor<3xi64>) {
  %z = stablehlo.constant dense<0> : tensor<i64>
  %o = stablehlo.constant dense<1> : tensor<i64>
  %r:2 = stablehlo.reduce(%x init: %z), (%y init: %o) across dimensions = [1] : (tensor<3x40xi64>, tensor<3x40xi64>, tensor<i64>, tensor<i64>) -> (tensor<3xi64>, tensor<3xi64>)
   reducer(%a: tensor<i64>, %b: tensor<i64>) (%c: tensor<i64>, %d: tensor<i64>) {
    %s = stablehlo.add %a, %b : tensor<i64>
    %p = stablehlo.multiply %c, %d : tensor<i64>
    stablehlo.return %s, %p : tensor<i64>, tensor<i64>
  }
  func.return %r#0, %r#1 : tensor<3xi64>, tensor<3xi64>
}
"""
  rng = np.random.default_rng(3)
  x = rng.integers(-1000, 1000, (3, 40))
  y = rng.integers(-3, 4, (3, 40))
  s, p = _run(src, x, y)
  np.testing.assert_array_equal(s, x.sum(axis=1))
  np.testing.assert_array_equal(p, np.prod(y, axis=1))


# --- reduce_window ------------------------------------------------------------


def _reduce_window_reference(x, init, wd, ws, bd, wdl, pad, fn):
  """spec: reduce_window, element by element."""
  rank = x.ndim
  dil = [(s - 1) * b + 1 if s else 0 for s, b in zip(x.shape, bd)]
  padded_shape = [max(p[0] + d + p[1], 0) for p, d in zip(pad, dil)]
  padded = np.full(padded_shape, init, dtype=x.dtype)
  for idx in np.ndindex(*x.shape):
    pos = [p[0] + i * b for p, i, b in zip(pad, idx, bd)]
    if all(0 <= q < s for q, s in zip(pos, padded_shape)):
      padded[tuple(pos)] = x[idx]
  out_shape = []
  for d in range(rank):
    dw = (wd[d] - 1) * wdl[d] + 1
    n = padded_shape[d]
    out_shape.append(0 if n == 0 or dw > n else (n - dw) // ws[d] + 1)
  out = np.empty(out_shape, dtype=x.dtype)
  for oi in np.ndindex(*out_shape):
    acc = init
    for wi in np.ndindex(*wd):
      acc = fn(acc, padded[tuple(o * s + w * dl for o, s, w, dl in
                                 zip(oi, ws, wi, wdl))])
    out[oi] = acc
  return out


def _reduce_window_src(shape, out_shape, dt, body, wd, ws, bd, wdl, pad):
  st = _ty((), dt)
  pads = ", ".join(f"[{a}, {b}]" for a, b in pad)
  return f"""
func.func @main(%x: {_ty(shape, dt)}, %init: {st}) -> {_ty(out_shape, dt)} {{
  %r = "stablehlo.reduce_window"(%x, %init) ({{
  ^bb0(%a: {st}, %b: {st}):
    %0 = {_BODY[body]} %a, %b : {st}
    stablehlo.return %0 : {st}
  }}) {{
    window_dimensions = array<i64: {_ints(wd)}>,
    window_strides = array<i64: {_ints(ws)}>,
    base_dilations = array<i64: {_ints(bd)}>,
    window_dilations = array<i64: {_ints(wdl)}>,
    padding = dense<[{pads}]> : tensor<{len(shape)}x2xi64>
  }} : ({_ty(shape, dt)}, {st}) -> {_ty(out_shape, dt)}
  func.return %r : {_ty(out_shape, dt)}
}}
"""


_RW_CASES = [
    # shape, wd, ws, bd, wdl, pad
    ((3, 2), (2, 1), (4, 1), (2, 1), (3, 1), ((2, 1), (0, 0))),
    ((5, 6), (2, 3), (1, 2), (1, 1), (1, 1), ((0, 0), (1, 1))),
    ((5, 6), (3, 2), (2, 1), (2, 3), (2, 1), ((1, 2), (-1, 3))),
    ((7,), (7,), (1,), (1,), (1,), ((6, 0),)),  # cumulative sum shape
    ((4, 4), (2, 2), (3, 3), (1, 1), (1, 1), ((-1, -1), (0, -2))),
    ((2, 3), (5, 5), (1, 1), (1, 1), (1, 1), ((0, 0), (0, 0))),  # empty
]


@pytest.mark.parametrize("body", ["add", "max", "mul"])
@pytest.mark.parametrize("case", _RW_CASES)
def test_reduce_window_matches_spec_formula(case, body):
  shape, wd, ws, bd, wdl, pad = case
  rng = np.random.default_rng(sum(shape))
  x = rng.integers(-4, 5, shape).astype(np.int32)
  init = np.int32({"add": 0, "max": -(2**31), "mul": 1}[body])
  want = _reduce_window_reference(x, init, wd, ws, bd, wdl, pad, _PY[body])
  src = _reduce_window_src(shape, want.shape, np.int32, body, wd, ws, bd, wdl,
                           pad)
  got, = _run(src, x, np.array(init))
  np.testing.assert_array_equal(got, want)


def test_reduce_window_generic_body():
  # max(a, b) - 0 * b is not a single-op body: the generic path runs it.
  src = """
func.func @main(%x: tensor<6xf32>) -> tensor<4xf32> {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %r = "stablehlo.reduce_window"(%x, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %0 = stablehlo.maximum %a, %b : tensor<f32>
    %1 = stablehlo.negate %0 : tensor<f32>
    %2 = stablehlo.negate %1 : tensor<f32>
    stablehlo.return %2 : tensor<f32>
  }) {window_dimensions = array<i64: 3>} : (tensor<6xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
"""
  x = np.array([3, 1, 4, 1, 5, 9], dtype=np.float32)
  got, = _run(src, x)
  np.testing.assert_array_equal(got, [4, 4, 5, 9])


def test_pad_helper_negative_and_interior():
  x = np.arange(1, 5)
  got = kr.pad(x, 0, [-1], [2], [1])
  # dilated: 1 0 2 0 3 0 4; drop one at the front, add two at the end.
  np.testing.assert_array_equal(got, [0, 2, 0, 3, 0, 4, 0, 0])


# --- select_and_scatter -------------------------------------------------------


def _sas_reference(operand, source, init, wd, ws, pad_lo, select_ge):
  """Per source element: first in-bounds window element, replaced whenever
  `select(selected, current)` is false; then result += source."""
  res = np.full(operand.shape, init, dtype=operand.dtype)
  for si in np.ndindex(*source.shape):
    sel = None
    for wi in np.ndindex(*wd):
      oi = tuple(s * st + w - p for s, st, w, p in zip(si, ws, wi, pad_lo))
      if not all(0 <= o < n for o, n in zip(oi, operand.shape)):
        continue
      if sel is None or not select_ge(operand[sel], operand[oi]):
        sel = oi
    if sel is not None:
      res[sel] += source[si]
  return res


@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("direction", ["GE", "GT", "LE", "LT"])
@pytest.mark.parametrize("dt", [np.int32, np.float32])
def test_select_and_scatter(direction, dt, generic):
  shape, wd, ws, pad = (5, 6), (3, 2), (2, 2), ((1, 1), (0, 1))
  src_shape = tuple(
      (n + p[0] + p[1] - w) // s + 1 for n, w, s, p in zip(shape, wd, ws, pad))
  rng = np.random.default_rng(1)
  operand = rng.integers(0, 4, shape).astype(dt)  # ties
  source = rng.integers(1, 10, src_shape).astype(dt)
  st = _ty((), dt)
  # `not not` hides the compare from the arg-max fast path.
  wrap = ("    %1 = stablehlo.not %0 : tensor<i1>\n"
          "    %2 = stablehlo.not %1 : tensor<i1>\n"
          "    stablehlo.return %2 : tensor<i1>") if generic else (
              "    stablehlo.return %0 : tensor<i1>")
  src = f"""
func.func @main(%x: {_ty(shape, dt)}, %s: {_ty(src_shape, dt)}, %i: {st}) -> {_ty(shape, dt)} {{
  %r = "stablehlo.select_and_scatter"(%x, %s, %i) ({{
  ^bb0(%a: {st}, %b: {st}):
    %0 = stablehlo.compare {direction}, %a, %b : ({st}, {st}) -> tensor<i1>
{wrap}
  }}, {{
  ^bb0(%a: {st}, %b: {st}):
    %0 = stablehlo.add %a, %b : {st}
    stablehlo.return %0 : {st}
  }}) {{
    window_dimensions = array<i64: {_ints(wd)}>,
    window_strides = array<i64: {_ints(ws)}>,
    padding = dense<[[{pad[0][0]}, {pad[0][1]}], [{pad[1][0]}, {pad[1][1]}]]> : tensor<2x2xi64>
  }} : ({_ty(shape, dt)}, {_ty(src_shape, dt)}, {st}) -> {_ty(shape, dt)}
  func.return %r : {_ty(shape, dt)}
}}
"""
  cmp = {"GE": lambda a, b: a >= b, "GT": lambda a, b: a > b,
         "LE": lambda a, b: a <= b, "LT": lambda a, b: a < b}[direction]
  want = _sas_reference(operand, source, dt(0), wd, ws,
                        [p[0] for p in pad], cmp)
  got, = _run(src, operand, source, np.array(dt(0)))
  np.testing.assert_array_equal(got, want)


# --- sort ---------------------------------------------------------------------


def _sort_src(shape, dts, dim, comparator_body, stable=True):
  types = [_ty(shape, dt) for dt in dts]
  args = ", ".join(f"%a{i}: {_ty((), dt)}, %b{i}: {_ty((), dt)}"
                   for i, dt in enumerate(dts))
  ins = ", ".join(f"%x{i}" for i in range(len(dts)))
  params = ", ".join(f"%x{i}: {t}" for i, t in enumerate(types))
  res = ", ".join(types)
  outs = ", ".join(f"%r#{i}" for i in range(len(dts)))
  return f"""
func.func @main({params}) -> ({res}) {{
  %r:{len(dts)} = "stablehlo.sort"({ins}) ({{
  ^bb0({args}):
{comparator_body}
  }}) {{dimension = {dim} : i64, is_stable = {str(stable).lower()}}} : ({res}) -> ({res})
  func.return {outs} : {res}
}}
"""


def _cmp(direction, lhs, rhs, dt, ctype=None):
  st = _ty((), dt)
  ct = f", {ctype}" if ctype else ""
  return (f"    %c = stablehlo.compare {direction}, {lhs}, {rhs}{ct} : "
          f"({st}, {st}) -> tensor<i1>\n    stablehlo.return %c : tensor<i1>")


@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.float32, np.float16])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_simple_comparator(dt, dim):
  rng = np.random.default_rng(2)
  x = rng.integers(0, 20, (6, 7)).astype(dt)
  y = np.arange(42, dtype=np.int32).reshape(6, 7)
  src = _sort_src(x.shape, [dt, np.int32], dim,
                  _cmp("LT", "%a0", "%b0", dt))
  got_x, got_y = _run(src, x, y)
  perm = np.argsort(x, axis=dim, kind="stable")
  np.testing.assert_array_equal(got_x, np.take_along_axis(x, perm, dim))
  np.testing.assert_array_equal(got_y, np.take_along_axis(y, perm, dim))


def test_sort_descending_stable_via_reversed_operands():
  x = np.array([3, 1, 3, 2, 1], dtype=np.int32)
  y = np.arange(5, dtype=np.int32)
  # compare LT %b, %a is "a > b": descending, ties keep input order.
  src = _sort_src(x.shape, [np.int32, np.int32], 0,
                  _cmp("LT", "%b0", "%a0", np.int32))
  gx, gy = _run(src, x, y)
  np.testing.assert_array_equal(gx, [3, 3, 2, 1, 1])
  np.testing.assert_array_equal(gy, [0, 2, 3, 1, 4])


def test_sort_total_order_floats():
  x = np.array([np.nan, 1.0, -0.0, -np.nan, 0.0, -np.inf, np.inf],
               dtype=np.float32)
  x[3] = -np.float32(np.nan)  # a negative NaN
  src = _sort_src(x.shape, [np.float32], 0,
                  _cmp("LT", "%a0", "%b0", np.float32, "TOTALORDER"))
  got, = _run(src, x)
  bits = got.view(np.uint32)
  assert np.isnan(got[0]) and bits[0] >> 31 == 1  # -NaN first
  np.testing.assert_array_equal(got[1:6], [-np.inf, -0.0, 0.0, 1.0, np.inf])
  assert np.signbit(got[2]) and not np.signbit(got[3])
  assert np.isnan(got[6]) and bits[6] >> 31 == 0  # +NaN last


def test_sort_lexicographic_comparator_generic_path():
  # (key0 ascending, ties by key1 descending) - not a single compare.
  body = """    %lt = stablehlo.compare LT, %a0, %b0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %eq = stablehlo.compare EQ, %a0, %b0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %gt1 = stablehlo.compare GT, %a1, %b1 : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %t = stablehlo.and %eq, %gt1 : tensor<i1>
    %c = stablehlo.or %lt, %t : tensor<i1>
    stablehlo.return %c : tensor<i1>"""
  rng = np.random.default_rng(5)
  k0 = rng.integers(0, 4, (3, 50)).astype(np.int32)
  k1 = rng.integers(0, 5, (3, 50)).astype(np.float32)
  src = _sort_src(k0.shape, [np.int32, np.float32], 1, body)
  g0, g1 = _run(src, k0, k1)
  perm = np.lexsort((-k1, k0), axis=1)
  np.testing.assert_array_equal(g0, np.take_along_axis(k0, perm, 1))
  np.testing.assert_array_equal(g1, np.take_along_axis(k1, perm, 1))


def test_sort_merge_path_matches_pairs(monkeypatch):
  body = """    %lt = stablehlo.compare LT, %a0, %b0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %n = stablehlo.not %lt : tensor<i1>
    %c = stablehlo.not %n : tensor<i1>
    stablehlo.return %c : tensor<i1>"""
  rng = np.random.default_rng(9)
  x = rng.integers(0, 10, (4, 37)).astype(np.int32)
  y = np.broadcast_to(np.arange(37, dtype=np.int32), x.shape).copy()
  src = _sort_src(x.shape, [np.int32, np.int32], 1, body)
  want = np.argsort(x, axis=1, kind="stable")
  # Force the merge sort.
  monkeypatch.setattr(kr, "_PAIRS_MAX_N", 8)
  monkeypatch.setattr(kr, "_PAIRS_MAX_ELEMENTS", 0)
  calls = []
  merge = kr._merge_sort
  monkeypatch.setattr(kr, "_merge_sort",
                      lambda *a: calls.append(1) or merge(*a))
  gx, gy = _run(src, x, y)
  assert calls
  np.testing.assert_array_equal(gy, want)
  np.testing.assert_array_equal(gx, np.take_along_axis(x, want, 1))


@pytest.mark.parametrize("merge", [False, True])
def test_sort_float_comparator_with_nan_falls_back(monkeypatch, merge):
  # FLOAT LT with NaNs is no strict weak order (NaN is "equal" to all), so
  # no order is right; the result must still be a permutation of the input.
  if merge:
    monkeypatch.setattr(kr, "_PAIRS_MAX_N", 2)
    monkeypatch.setattr(kr, "_PAIRS_MAX_ELEMENTS", 0)
  x = np.array([3, np.nan, 1, 2, np.nan, 0, 5, np.nan, -1, 4, 2],
               dtype=np.float32)
  y = np.arange(x.size, dtype=np.int32)
  src = _sort_src(x.shape, [np.float32, np.int32], 0,
                  _cmp("LT", "%a0", "%b0", np.float32, "FLOAT"))
  got, perm = _run(src, x, y)
  np.testing.assert_array_equal(np.sort(perm), y)
  np.testing.assert_array_equal(got, x[perm])


# --- top_k --------------------------------------------------------------------


def _top_k_src(shape, dt, k):
  out = shape[:-1] + (k,)
  return f"""
func.func @main(%x: {_ty(shape, dt)}) -> ({_ty(out, dt)}, {_ty(out, np.int32)}) {{
  %v, %i = chlo.top_k(%x, k = {k}) : {_ty(shape, dt)} -> ({_ty(out, dt)}, {_ty(out, np.int32)})
  func.return %v, %i : {_ty(out, dt)}, {_ty(out, np.int32)}
}}
"""


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.uint8])
def test_top_k_matches_jax(dt):
  lax = pytest.importorskip("jax.lax")
  rng = np.random.default_rng(4)
  x = rng.integers(0, 9, (3, 4, 10)).astype(dt)  # ties
  v, i = _run(_top_k_src(x.shape, dt, 4), x)
  jv, ji = lax.top_k(x, 4)
  np.testing.assert_array_equal(v, np.asarray(jv))
  np.testing.assert_array_equal(i, np.asarray(ji))


def test_top_k_nan_and_zero_order():
  x = np.array([1.0, np.nan, -0.0, 0.0, -np.nan], dtype=np.float32)
  x[4] = -np.float32(np.nan)
  v, i = _run(_top_k_src(x.shape, np.float32, 5), x)
  np.testing.assert_array_equal(i, [1, 0, 3, 2, 4])  # +NaN, 1, +0, -0, -NaN


def test_top_k_bool():
  x = np.array([[False, True, True, False]])
  v, i = _run(_top_k_src(x.shape, np.bool_, 3), x)
  np.testing.assert_array_equal(v, [[True, True, False]])
  np.testing.assert_array_equal(i, [[1, 2, 0]])


# --- corpus -------------------------------------------------------------------

_INTERPRET = ("reduce", "reduce_window", "select_and_scatter", "sort")
_TESTDATA_SAMPLE = (
    "reduce_window_max_float32_112_112.mlir",
    "argmax_float32_18_12.mlir",
    "cumsum_float64_8_9.mlir",
    "sort_int32_100_int32_100_float32_100.mlir",
    "select_and_scatter_add_float32_3_5_7_float32_2_4_6.mlir",
    "top_k_bfloat16_5_3_chlo.mlir",
    "reduce_sum_float32_2_3.mlir",
)


@pytest.mark.parametrize("name", _INTERPRET)
def test_interpret_corpus(name):
  assert corpus_testing.run_corpus_file("interpret", f"{name}.mlir") >= 1


@pytest.mark.parametrize("name", _TESTDATA_SAMPLE)
def test_testdata_sample(name):
  assert corpus_testing.run_corpus_file("testdata", name) == 1


def test_window_positions_cover_product():
  # Sanity of the helper the kernels use for select_and_scatter windows.
  flat, valid = kr._windows(np.zeros((3, 3)), (2, 2), [2, 2], [1, 1],
                            [0, 0])
  assert flat.shape == (2, 2, 4) and valid.all()
  want = [[r * 3 + c for r, c in itertools.product((i, i + 1), (j, j + 1))]
          for i in range(2) for j in range(2)]
  np.testing.assert_array_equal(flat.reshape(4, 4), want)
