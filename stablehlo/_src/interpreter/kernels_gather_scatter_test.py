"""Tests for the gather / dynamic_gather / scatter kernels.

Expectations come from jax.lax (same semantics where indices are in bounds;
jax's CLIP mode clamps gather starts as the spec does), from plain numpy
loops written after the spec formulas, or from hand computation.
"""


import numpy as np
import pytest

from stablehlo._src import text
from stablehlo._src.interpreter import Interpreter
from stablehlo._src.interpreter import corpus_testing
from stablehlo._src.interpreter import kernels_gather_scatter as gs

_ET = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
       np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
       np.dtype(np.int8): "i8", np.dtype(np.uint8): "ui8",
       np.dtype(np.bool_): "i1"}


def _ty(shape, dt):
  et = _ET[np.dtype(dt)]
  return "tensor<" + "".join(f"{d}x" for d in shape) + et + ">"


def _run(src, *args):
  module = text.parse_module(src, "t.mlir")
  return Interpreter(module).run("main", list(args))


def _ints(xs):
  return ", ".join(str(x) for x in xs)


def _gather_src(op_shape, op_dt, idx_shape, idx_dt, out_shape, offset_dims,
                collapsed, obatch, ibatch, sim, ivd, sizes):
  return f"""
func.func @main(%op: {_ty(op_shape, op_dt)}, %idx: {_ty(idx_shape, idx_dt)}) -> {_ty(out_shape, op_dt)} {{
  %r = "stablehlo.gather"(%op, %idx) {{
    dimension_numbers = #stablehlo.gather<offset_dims = [{_ints(offset_dims)}],
      collapsed_slice_dims = [{_ints(collapsed)}],
      operand_batching_dims = [{_ints(obatch)}],
      start_indices_batching_dims = [{_ints(ibatch)}],
      start_index_map = [{_ints(sim)}], index_vector_dim = {ivd}>,
    slice_sizes = array<i64: {_ints(sizes)}>
  }} : ({_ty(op_shape, op_dt)}, {_ty(idx_shape, idx_dt)}) -> {_ty(out_shape, op_dt)}
  func.return %r : {_ty(out_shape, op_dt)}
}}
"""


_GATHER_CASES = [
    # op_shape, idx_shape, offset_dims, collapsed, obatch, ibatch, sim, ivd,
    # slice_sizes
    ((5, 6), (4, 1), (1,), (0,), (), (), (0,), 1, (1, 6)),
    ((5, 6), (4,), (1,), (0,), (), (), (0,), 1, (1, 3)),
    ((3, 4, 2), (2, 3, 2), (2, 3), (0,), (), (), (1, 0), 2, (1, 2, 2)),
    ((3, 4, 2), (2, 2, 3), (0, 3), (0,), (), (), (1, 0), 1, (1, 2, 2)),
    ((2, 3, 4, 5), (2, 6, 2), (2, 3), (1,), (0,), (0,), (1, 2), 2,
     (1, 1, 2, 5)),
    ((2, 3, 4, 2), (2, 2, 3, 2), (3, 4), (1,), (0,), (1,), (2, 1), 3,
     (1, 1, 2, 2)),
    ((4, 5), (3, 0), (1, 2), (), (), (), (), 1, (2, 3)),
    ((7,), (), (0,), (), (), (), (0,), 0, (3,)),
]


@pytest.mark.parametrize("case", _GATHER_CASES)
def test_gather_matches_jax_with_clamping(case):
  lax = pytest.importorskip("jax.lax")
  (op_shape, idx_shape, offset_dims, collapsed, obatch, ibatch, sim, ivd,
   sizes) = case
  rng = np.random.default_rng(len(op_shape) * 7 + len(idx_shape))
  op = rng.integers(-50, 50, op_shape).astype(np.float32)
  # Out-of-range starts too: gather clamps them into the operand.
  idx = rng.integers(-3, 9, idx_shape).astype(np.int32)
  dn = lax.GatherDimensionNumbers(
      offset_dims=offset_dims, collapsed_slice_dims=collapsed,
      start_index_map=sim, operand_batching_dims=obatch,
      start_indices_batching_dims=ibatch)
  jidx = idx if ivd < idx.ndim else idx[..., None]
  if ivd < idx.ndim and ivd != idx.ndim - 1:
    jidx = np.moveaxis(idx, ivd, -1)
    ibatch_j = tuple(b - (1 if b > ivd else 0) for b in ibatch)
    dn = lax.GatherDimensionNumbers(
        offset_dims=offset_dims, collapsed_slice_dims=collapsed,
        start_index_map=sim, operand_batching_dims=obatch,
        start_indices_batching_dims=ibatch_j)
  want = np.asarray(lax.gather(op, jidx, dn, sizes,
                               mode=lax.GatherScatterMode.CLIP))
  src = _gather_src(op_shape, np.float32, idx_shape, np.int32, want.shape,
                    offset_dims, collapsed, obatch, ibatch, sim, ivd, sizes)
  got, = _run(src, op, idx)
  np.testing.assert_array_equal(got, want)


def test_gather_clamps_by_hand():
  # Starts 5 and -4 clamp to 3 (= 5 - 2) and 0.
  src = _gather_src((5,), np.int64, (2, 1), np.int64, (2, 2), (1,), (), (),
                    (), (0,), 1, (2,))
  got, = _run(src, np.arange(10, 15), np.array([[5], [-4]]))
  np.testing.assert_array_equal(got, [[13, 14], [10, 11]])


def test_gather_unsigned_huge_index_clamps_to_top():
  src = _gather_src((5,), np.int32, (1, 1), np.uint8, (1, 1), (1,), (), (),
                    (), (0,), 1, (1,))
  got, = _run(src, np.arange(5, dtype=np.int32),
              np.array([[255]], dtype=np.uint8))
  np.testing.assert_array_equal(got, [[4]])


def test_dynamic_gather():
  src = """
func.func @main(%op: tensor<3x4xi32>, %idx: tensor<2x2xi64>) -> tensor<2x2x2xi32> {
  %sizes = stablehlo.constant dense<[2, 2]> : tensor<2xi64>
  %r = "stablehlo.dynamic_gather"(%op, %idx, %sizes) {
    dimension_numbers = #stablehlo.gather<offset_dims = [1, 2],
      start_index_map = [0, 1], index_vector_dim = 1>
  } : (tensor<3x4xi32>, tensor<2x2xi64>, tensor<2xi64>) -> tensor<2x2x2xi32>
  func.return %r : tensor<2x2x2xi32>
}
"""
  op = np.arange(12, dtype=np.int32).reshape(3, 4)
  got, = _run(src, op, np.array([[0, 0], [2, 3]]))
  # The second start (2, 3) clamps to (1, 2).
  np.testing.assert_array_equal(got, [op[0:2, 0:2], op[1:3, 2:4]])


# --- scatter ------------------------------------------------------------------

_BODIES = {
    "add": "stablehlo.add %a, %b : {t}",
    "max": "stablehlo.maximum %a, %b : {t}",
    "min": "stablehlo.minimum %a, %b : {t}",
    "mul": "stablehlo.multiply %a, %b : {t}",
    "sub": "stablehlo.subtract %a, %b : {t}",
}


def _scatter_src(in_shape, dt, idx_shape, upd_shape, uwd, iwd, ibd, sibd,
                 sdod, ivd, body):
  st = _ty((), dt)
  if body == "replace":
    region = f"^bb0(%a: {st}, %b: {st}):\n    stablehlo.return %b : {st}"
  else:
    region = (f"^bb0(%a: {st}, %b: {st}):\n    %0 = " +
              _BODIES[body].format(t=st) +
              f"\n    stablehlo.return %0 : {st}")
  it, xt, ut = _ty(in_shape, dt), _ty(idx_shape, np.int64), _ty(upd_shape, dt)
  return f"""
func.func @main(%x: {it}, %i: {xt}, %u: {ut}) -> ({it}, {it}) {{
  %r = "stablehlo.scatter"(%x, %i, %u) ({{
  {region}
  }}) {{
    scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [{_ints(uwd)}], inserted_window_dims = [{_ints(iwd)}],
      input_batching_dims = [{_ints(ibd)}],
      scatter_indices_batching_dims = [{_ints(sibd)}],
      scatter_dims_to_operand_dims = [{_ints(sdod)}], index_vector_dim = {ivd}>
  }} : ({it}, {xt}, {ut}) -> {it}
  func.return %r, %x : {it}, {it}
}}
"""


def _scatter_reference(x, idx, upd, uwd, iwd, ibd, sibd, sdod, ivd, fn):
  """The spec's scatter formula, one update element at a time."""
  res = x.copy()
  scatter_dims = [d for d in range(upd.ndim) if d not in uwd]
  win_dims = [d for d in range(x.ndim) if d not in iwd and d not in ibd]
  for ui in np.ndindex(*upd.shape):
    usi = [ui[d] for d in scatter_dims]
    sii = list(usi)
    if ivd < idx.ndim:
      sii.insert(ivd, slice(None))
      start = idx[tuple(sii)]
    else:
      start = [idx[tuple(usi)]]
    full = [0] * x.ndim
    for k, d in enumerate(sdod):
      full[d] += int(start[k])
    for d, b in zip(ibd, sibd):
      full[d] += usi[b - (1 if b > ivd else 0)]
    for k, d in enumerate(win_dims):
      full[d] += ui[uwd[k]]
    if all(0 <= f < s for f, s in zip(full, x.shape)):
      res[tuple(full)] = fn(res[tuple(full)], upd[ui])
  return res


_FNS = {"add": lambda a, b: a + b, "max": max, "min": min,
        "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
        "replace": lambda a, b: b}

_SCATTER_CASES = [
    # in_shape, idx_shape, upd_shape, uwd, iwd, ibd, sibd, sdod, ivd
    ((3, 4, 2), (2, 3, 2), (2, 3, 2, 2), (2, 3), (0,), (), (), (1, 0), 2),
    ((2, 3, 4, 2), (2, 2, 3, 2), (2, 2, 3, 2, 2), (3, 4), (1,), (0,), (1,),
     (2, 1), 3),
    ((6,), (10,), (10,), (), (0,), (), (), (0,), 1),
    ((5, 3), (4, 1), (4, 3), (1,), (0,), (), (), (0,), 1),
    ((5, 3), (1, 4), (3, 4), (0,), (1,), (), (), (1,), 0),
]


@pytest.mark.parametrize("body", ["add", "max", "min", "mul", "sub",
                                  "replace"])
@pytest.mark.parametrize("case", _SCATTER_CASES)
def test_scatter_matches_spec_formula(case, body):
  in_shape, idx_shape, upd_shape, uwd, iwd, ibd, sibd, sdod, ivd = case
  rng = np.random.default_rng(sum(in_shape) + len(body))
  x = rng.integers(-20, 20, in_shape).astype(np.int32)
  # Some indices out of bounds (negative or too large): skipped.
  idx = rng.integers(-1, 5, idx_shape).astype(np.int64)
  u = rng.integers(-5, 5, upd_shape).astype(np.int32)
  want = _scatter_reference(x, idx, u, uwd, iwd, ibd, sibd, sdod, ivd,
                            _FNS[body])
  src = _scatter_src(in_shape, np.int32, idx_shape, upd_shape, uwd, iwd, ibd,
                     sibd, sdod, ivd, body)
  x_before = x.copy()
  got, x_after = _run(src, x, idx, u)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(x_after, x_before)  # input untouched


def test_scatter_add_float_keeps_update_order():
  # 1e8 + 1 + 1 + ... rounds differently in another order; the spec's
  # sequential order with f32 rounding after every step keeps 1e8.
  src = _scatter_src((1,), np.float32, (5, 1), (5,), (), (0,), (), (), (0,),
                     1, "add")
  u = np.array([1e8, 1, 1, 1, -1e8], dtype=np.float32)
  got, _ = _run(src, np.zeros(1, np.float32), np.zeros((5, 1), np.int64), u)
  acc = np.float32(0)
  for v in u:
    acc = np.float32(acc + v)
  np.testing.assert_array_equal(got, [acc])


def test_scatter_max_signed_zero_and_nan():
  src = _scatter_src((3,), np.float32, (4, 1), (4,), (), (0,), (), (), (0,),
                     1, "max")
  x = np.array([-0.0, 1.0, -0.0], dtype=np.float32)
  u = np.array([0.0, np.nan, -0.0, 2.0], dtype=np.float32)
  idx = np.array([[0], [1], [2], [1]])
  got, _ = _run(src, x, idx, u)
  assert got[0] == 0 and not np.signbit(got[0])  # max(-0, +0) = +0
  assert np.isnan(got[1])
  assert got[2] == 0 and np.signbit(got[2])  # max(-0, -0) = -0


def test_scatter_generic_body_rounds_in_update_order():
  # body(a, b) = a * 2 + b is order dependent; duplicates apply in order.
  src = """
func.func @main(%x: tensor<3xi64>, %i: tensor<5x1xi64>, %u: tensor<5xi64>) -> tensor<3xi64> {
  %r = "stablehlo.scatter"(%x, %i, %u) ({
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %0 = stablehlo.add %a, %a : tensor<i64>
    %1 = stablehlo.add %0, %b : tensor<i64>
    stablehlo.return %1 : tensor<i64>
  }) {
    scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>
  } : (tensor<3xi64>, tensor<5x1xi64>, tensor<5xi64>) -> tensor<3xi64>
  func.return %r : tensor<3xi64>
}
"""
  x = np.array([1, 2, 3])
  idx = np.array([[0], [2], [0], [0], [7]])
  u = np.array([10, 20, 30, 40, 50])
  got, = _run(src, x, idx, u)
  a0 = ((1 * 2 + 10) * 2 + 30) * 2 + 40
  np.testing.assert_array_equal(got, [a0, 2, 3 * 2 + 20])


def test_variadic_scatter():
  src = """
func.func @main(%x: tensor<4xi32>, %y: tensor<4xf32>, %i: tensor<3x1xi32>,
                %u: tensor<3xi32>, %v: tensor<3xf32>) -> (tensor<4xi32>, tensor<4xf32>) {
  %r:2 = "stablehlo.scatter"(%x, %y, %i, %u, %v) ({
  ^bb0(%a: tensor<i32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<f32>):
    %0 = stablehlo.add %a, %c : tensor<i32>
    %1 = stablehlo.multiply %b, %d : tensor<f32>
    stablehlo.return %0, %1 : tensor<i32>, tensor<f32>
  }) {
    scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>
  } : (tensor<4xi32>, tensor<4xf32>, tensor<3x1xi32>, tensor<3xi32>, tensor<3xf32>) -> (tensor<4xi32>, tensor<4xf32>)
  func.return %r#0, %r#1 : tensor<4xi32>, tensor<4xf32>
}
"""
  got_i, got_f = _run(src, np.zeros(4, np.int32), np.ones(4, np.float32),
                      np.array([[1], [3], [1]], np.int32),
                      np.array([5, 6, 7], np.int32),
                      np.array([2, 3, 4], np.float32))
  np.testing.assert_array_equal(got_i, [0, 12, 0, 6])
  np.testing.assert_array_equal(got_f, [1, 8, 1, 3])


def test_scatter_i4_add_wraps():
  src = """
func.func @main(%x: tensor<2xi4>, %i: tensor<2x1xi32>, %u: tensor<2xi4>) -> tensor<2xi4> {
  %r = "stablehlo.scatter"(%x, %i, %u) ({
  ^bb0(%a: tensor<i4>, %b: tensor<i4>):
    %0 = stablehlo.add %a, %b : tensor<i4>
    stablehlo.return %0 : tensor<i4>
  }) {
    scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>
  } : (tensor<2xi4>, tensor<2x1xi32>, tensor<2xi4>) -> tensor<2xi4>
  func.return %r : tensor<2xi4>
}
"""
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  i4 = ml_dtypes.int4
  got, = _run(src, np.array([7, -8], i4), np.array([[0], [1]], np.int32),
              np.array([3, -1], i4))
  # 7 + 3 = 10 wraps to -6; -8 + -1 = -9 wraps to 7.
  np.testing.assert_array_equal(got.astype(np.int64), [-6, 7])


@pytest.mark.parametrize("et,body", [
    ("bf16", "add"), ("bf16", "max"), ("f16", "mul"), ("f8E4M3FN", "add"),
    ("i4", "add"), ("ui4", "max"), ("i2", "mul"), ("i1", "add"),
    ("i1", "mul"), ("complex<f32>", "add")])
def test_scatter_element_types(et, body):
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  dt = {"bf16": ml_dtypes.bfloat16, "f16": np.float16,
        "f8E4M3FN": ml_dtypes.float8_e4m3fn, "i4": ml_dtypes.int4,
        "ui4": ml_dtypes.uint4, "i2": ml_dtypes.int2, "i1": np.bool_,
        "complex<f32>": np.complex64}[et]
  rng = np.random.default_rng(11)

  def gen(shape):
    if et == "i1":
      return rng.integers(0, 2, shape).astype(bool)
    if et in ("i4", "ui4", "i2"):
      return rng.integers(0 if et == "ui4" else -2, 2, shape).astype(dt)
    if et.startswith("complex"):
      return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
             ).astype(dt)
    return (rng.standard_normal(shape) * 4).astype(dt)

  x, u = gen((4,)), gen((12,))
  idx = rng.integers(0, 4, (12, 1))
  op = {"add": "stablehlo.add", "max": "stablehlo.maximum",
        "mul": "stablehlo.multiply"}[body]
  src = f"""
func.func @main(%x: tensor<4x{et}>, %i: tensor<12x1xi64>, %u: tensor<12x{et}>) -> tensor<4x{et}> {{
  %r = "stablehlo.scatter"(%x, %i, %u) ({{
  ^bb0(%a: tensor<{et}>, %b: tensor<{et}>):
    %0 = {op} %a, %b : tensor<{et}>
    stablehlo.return %0 : tensor<{et}>
  }}) {{scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>}} : (tensor<4x{et}>, tensor<12x1xi64>, tensor<12x{et}>) -> tensor<4x{et}>
  func.return %r : tensor<4x{et}>
}}
"""
  got, = _run(src, x, idx, u)
  want = x.copy()
  for k in range(12):  # one scalar step at a time, in update order
    t, acc, v = idx[k, 0], want[idx[k, 0]], u[k]
    if et == "i1":
      want[t] = acc | v if body == "add" else acc & v
    elif et in ("i4", "ui4", "i2"):
      bits = 2 if et == "i2" else 4
      a, b = int(acc), int(v)
      r = {"add": a + b, "max": max(a, b), "mul": a * b}[body]
      r &= (1 << bits) - 1
      if et != "ui4" and r >= 1 << (bits - 1):
        r -= 1 << bits
      want[t] = r
    else:
      want[t] = {"add": lambda: acc + v, "max": lambda: np.maximum(acc, v),
                 "mul": lambda: acc * v}[body]()
  wide = np.complex128 if et.startswith("complex") else np.float64
  assert got.dtype == want.dtype
  np.testing.assert_array_equal(got.astype(wide), want.astype(wide))


def test_apply_updates_replace_last_wins():
  r = np.zeros(3, np.int32)
  region = text.parse_module("""
func.func @f(%x: tensor<3xi32>, %i: tensor<3x1xi32>, %u: tensor<3xi32>) -> tensor<3xi32> {
  %r = "stablehlo.scatter"(%x, %i, %u) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    stablehlo.return %b : tensor<i32>
  }) {
    scatter_dimension_numbers = #stablehlo.scatter<
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>
  } : (tensor<3xi32>, tensor<3x1xi32>, tensor<3xi32>) -> tensor<3xi32>
  func.return %r : tensor<3xi32>
}""", "t").body.operations[0].regions[0].blocks[0].operations[0].regions[0]
  gs.apply_updates(None, region, [r], np.array([2, 0, 2, 2]),
                   [np.array([1, 2, 3, 4], np.int32)])
  np.testing.assert_array_equal(r, [2, 0, 4])


# --- corpus -------------------------------------------------------------------

_INTERPRET = ("gather", "dynamic_gather", "scatter")
_TESTDATA_SAMPLE = (
    "gather_float32_10_10_10_10_int64_1_1_4_3.mlir",
    "gather_float32_10_10_10_int32_2_2_1.mlir",
    "scatter_add_float64_3_5_40_float64_3_5_2.mlir",
    "scatter_max_float64_3_5_40_float64_3_5_2.mlir",
    "scatter_mul_uint64_3_5_40_uint64_3_5_2.mlir",
)


@pytest.mark.parametrize("name", _INTERPRET)
def test_interpret_corpus(name):
  assert corpus_testing.run_corpus_file("interpret", f"{name}.mlir") >= 1


@pytest.mark.parametrize("name", _TESTDATA_SAMPLE)
def test_testdata_sample(name):
  assert corpus_testing.run_corpus_file("testdata", name) == 1
