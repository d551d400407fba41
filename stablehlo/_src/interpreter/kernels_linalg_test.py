"""Tests for the contraction / numerics kernels. Expectations come from
direct loop implementations of the spec formulas written here, from
algebraic identities (L L^H = a, op(a) x = b) or from jax when installed."""

import itertools

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import corpus_testing
from stablehlo._src.interpreter import kernels_linalg  # noqa: F401


def _run(src, *args):
  module = text.parse_module(src, "t.mlir")
  return interpreter.Interpreter(module).run("main", list(args))


def _ts(shape, et):
  return "tensor<" + "".join(f"{d}x" for d in shape) + et + ">"


# --- dot_general ----------------------------------------------------------------


def _dot_src(ls, rs, os_, et_in, et_out, lb, rb, lc, rc):
  return f"""
  func.func @main(%a: {_ts(ls, et_in)}, %b: {_ts(rs, et_in)}) -> {_ts(os_, et_out)} {{
    %0 = stablehlo.dot_general %a, %b, batching_dims = {list(lb)} x {list(rb)},
        contracting_dims = {list(lc)} x {list(rc)}
        : ({_ts(ls, et_in)}, {_ts(rs, et_in)}) -> {_ts(os_, et_out)}
    return %0 : {_ts(os_, et_out)}
  }}"""


def _naive_dot(lhs, rhs, lb, rb, lc, rc, acc=lambda s, p: s + p, zero=0):
  """dot_general by the spec's index formula, one element at a time."""
  lfree = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
  rfree = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
  bsh = [lhs.shape[d] for d in lb]
  out_shape = (bsh + [lhs.shape[d] for d in lfree] +
               [rhs.shape[d] for d in rfree])
  out = np.empty(out_shape, dtype=object)
  for idx in itertools.product(*[range(s) for s in out_shape]):
    bi = idx[:len(lb)]
    li = idx[len(lb):len(lb) + len(lfree)]
    ri = idx[len(lb) + len(lfree):]
    s = zero
    for ci in itertools.product(*[range(lhs.shape[d]) for d in lc]):
      lidx = [0] * lhs.ndim
      ridx = [0] * rhs.ndim
      for d, v in zip(lb, bi):
        lidx[d] = v
      for d, v in zip(rb, bi):
        ridx[d] = v
      for d, v in zip(lfree, li):
        lidx[d] = v
      for d, v in zip(rfree, ri):
        ridx[d] = v
      for d, e, v in zip(lc, rc, ci):
        lidx[d] = v
        ridx[e] = v
      s = acc(s, lhs[tuple(lidx)] * rhs[tuple(ridx)])
    out[idx] = s
  return out


def test_dot_general_batching_and_contracting_in_any_order():
  rng = np.random.default_rng(0)
  lhs = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)
  rhs = rng.standard_normal((5, 3, 6, 4)).astype(np.float32)
  lb, rb, lc, rc = (0,), (1,), (3, 2), (0, 3)
  (out,) = _run(_dot_src(lhs.shape, rhs.shape, (3, 2, 6), "f32", "f32",
                         lb, rb, lc, rc), lhs, rhs)
  want = _naive_dot(lhs.astype(np.float64), rhs.astype(np.float64), lb, rb,
                    lc, rc).astype(np.float64)
  assert out.dtype == np.float32 and out.shape == (3, 2, 6)
  np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_dot_general_integers_wrap_in_the_result_type():
  lhs = np.array([[100, 100, -128], [127, 1, 2]], np.int8)
  rhs = np.array([[100, 3], [100, 4], [-128, 5]], np.int8)
  (out,) = _run(_dot_src((2, 3), (3, 2), (2, 2), "i8", "i8", (), (), (1,),
                         (0,)), lhs, rhs)
  want = _naive_dot(lhs.astype(object), rhs.astype(object), [], [], [1], [0])
  want = np.array([[((int(v) + 128) % 256) - 128 for v in row]
                   for row in want], np.int8)
  assert out.dtype == np.int8 and out.tolist() == want.tolist()


def test_dot_general_mixed_types_convert_operands_first():
  lhs = np.array([[200, 255]], np.uint8)
  rhs = np.array([[2], [3]], np.uint8)
  (out,) = _run(_dot_src((1, 2), (2, 1), (1, 1), "ui8", "i32", (), (), (1,),
                         (0,)), lhs, rhs)
  assert out.dtype == np.int32 and out.tolist() == [[200 * 2 + 255 * 3]]
  # f32 operands, f64 result.
  a = np.array([1.5, 2.25], np.float32)
  (out,) = _run(_dot_src((2,), (2,), (), "f32", "f64", (), (), (0,), (0,)),
                a, a)
  assert out.dtype == np.float64 and float(out) == 1.5**2 + 2.25**2


def test_dot_general_booleans_are_or_of_ands():
  lhs = np.array([[True, False], [False, False]])
  rhs = np.array([[False, True], [True, True]])
  (out,) = _run(_dot_src((2, 2), (2, 2), (2, 2), "i1", "i1", (), (), (1,),
                         (0,)), lhs, rhs)
  assert out.dtype == np.bool_
  assert out.tolist() == [[False, True], [False, False]]


def test_dot_general_narrow_and_complex_types():
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  a = np.array([[7, -8], [3, 1]], ml_dtypes.int4)
  (out,) = _run(_dot_src((2, 2), (2, 2), (2, 2), "i4", "i4", (), (), (1,),
                         (0,)), a, a)
  # [[49-24, -56-8], [21+3, -24+1]] wrapped to 4 bits.
  want = [[25, -64], [24, -23]]
  assert out.astype(int).tolist() == [[((v + 8) % 16) - 8 for v in r]
                                      for r in want]
  c = np.array([1 + 2j, 3 - 1j], np.complex64)
  (out,) = _run(_dot_src((2,), (2,), (), "complex<f32>", "complex<f32>", (),
                         (), (0,), (0,)), c, c)
  assert out.dtype == np.complex64 and complex(out) == (1 + 2j)**2 + (3 - 1j)**2


def test_dot_general_float_sums_follow_the_contraction_order():
  # The spec sums products one at a time in the result type; with f32
  # rounding the order is visible.
  a = np.array([1e8] + [1.0] * 9 + [-1e8] + [1.0] * 5, np.float32)
  ones = np.ones_like(a)
  acc = np.float32(0)
  for v in a:
    acc = np.float32(acc + v)
  (out,) = _run(_dot_src((16,), (16,), (), "f32", "f32", (), (), (0,), (0,)),
                a, ones)
  assert float(out) == float(acc) == 5.0


def test_dot_general_no_contraction_is_an_outer_product():
  a = np.array([1, 2], np.int32)
  b = np.array([3, 4, 5], np.int32)
  (out,) = _run(_dot_src((2,), (3,), (2, 3), "i32", "i32", (), (), (), ()),
                a, b)
  assert out.tolist() == np.outer(a, b).tolist()


def test_legacy_dot():
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  b = np.arange(3, dtype=np.float32)
  (out,) = _run("""
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
    %0 = "stablehlo.dot"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }""", a, b)
  assert out.tolist() == [5.0, 14.0]


def test_legacy_einsum():
  a = np.arange(6, dtype=np.int32).reshape(2, 3)
  b = np.arange(12, dtype=np.int32).reshape(3, 4)
  prod, tr = _run("""
  func.func @main(%a: tensor<2x3xi32>, %b: tensor<3x4xi32>)
      -> (tensor<2x4xi32>, tensor<3x2xi32>) {
    %0 = "stablehlo.einsum"(%a, %b) {einsum_config = "ab,bc->ac"}
        : (tensor<2x3xi32>, tensor<3x4xi32>) -> tensor<2x4xi32>
    %1 = "stablehlo.unary_einsum"(%a) {einsum_config = "ab->ba"}
        : (tensor<2x3xi32>) -> tensor<3x2xi32>
    return %0, %1 : tensor<2x4xi32>, tensor<3x2xi32>
  }""", a, b)
  assert prod.tolist() == (a @ b).tolist() and tr.tolist() == a.T.tolist()


# --- convolution -------------------------------------------------------------------


def _naive_conv(lhs, rhs, strides, padding, lhs_dil, rhs_dil, reversal, fgc,
                bgc):
  """Spec "convolution" for the [b, f, spatial...] x [o, i, spatial...] ->
  [b, f, spatial...] layout, element by element."""
  ns = lhs.ndim - 2
  n, c = lhs.shape[:2]
  co, ci = rhs.shape[:2]
  ks = rhs.shape[2:]
  # dilate + pad the lhs as `pad` would (negative padding crops).
  dil = [(s - 1) * d + 1 if s else 0 for s, d in zip(lhs.shape[2:], lhs_dil)]
  base = np.zeros((n, c) + tuple(dil), dtype=lhs.dtype)
  base[(slice(None), slice(None)) +
       tuple(slice(None, None, d) for d in lhs_dil)] = lhs
  padded_shape = [lo + s + hi for s, (lo, hi) in zip(dil, padding)]
  padded = np.zeros((n, c) + tuple(max(p, 0) for p in padded_shape),
                    dtype=lhs.dtype)
  for idx in itertools.product(*[range(s) for s in dil]):
    dst = [i + lo for i, (lo, _) in zip(idx, padding)]
    if all(0 <= v < p for v, p in zip(dst, padded_shape)):
      padded[(slice(None), slice(None)) + tuple(dst)] = base[
          (slice(None), slice(None)) + idx]
  win = [(k - 1) * d + 1 for k, d in zip(ks, rhs_dil)]
  osz = [max(0, (p - w) // s + 1) if p >= w else 0
         for p, w, s in zip(padded_shape, win, strides)]
  out = np.zeros((n // bgc, co) + tuple(osz), dtype=np.float64)
  cog = co // fgc
  cob = co // bgc
  for b, o in itertools.product(range(n // bgc), range(co)):
    g = o // cog
    bg = o // cob
    for oi in itertools.product(*[range(s) for s in osz]):
      s = 0.0
      for i in range(ci):
        for ki in itertools.product(*[range(k) for k in ks]):
          kk = tuple(k - 1 - v if reversal[j] else v
                     for j, (k, v) in enumerate(zip(ks, ki)))
          pos = tuple(oi[j] * strides[j] + ki[j] * rhs_dil[j]
                      for j in range(ns))
          s += (padded[(bg * (n // bgc) + b, g * ci + i) + pos] *
                rhs[(o, i) + kk])
      out[(b, o) + oi] = s
  return out


def _conv_src(ls, rs, os_, et, strides, padding, lhs_dil, rhs_dil, reversal,
              fgc, bgc, dyn=False):
  ns = len(ls) - 2
  sp = ", ".join(str(i) for i in range(ns))
  dn = f"[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]"
  pad = ", ".join(f"[{a}, {b}]" for a, b in padding)
  rev = ", ".join("true" if r else "false" for r in reversal)
  lt, rt, ot = _ts(ls, et), _ts(rs, et), _ts(os_, et)
  if dyn:
    pt = _ts((ns, 2), "i64")
    return f"""
    func.func @main(%a: {lt}, %b: {rt}, %p: {pt}) -> {ot} {{
      %0 = "stablehlo.dynamic_conv"(%a, %b, %p) {{
        window_strides = array<i64: {", ".join(map(str, strides))}>,
        lhs_dilation = array<i64: {", ".join(map(str, lhs_dil))}>,
        rhs_dilation = array<i64: {", ".join(map(str, rhs_dil))}>,
        window_reversal = array<i1: {rev}>,
        dimension_numbers = #stablehlo.conv<{dn}>,
        feature_group_count = {fgc} : i64, batch_group_count = {bgc} : i64
      }} : ({lt}, {rt}, {pt}) -> {ot}
      return %0 : {ot}
    }}"""
  return f"""
  func.func @main(%a: {lt}, %b: {rt}) -> {ot} {{
    %0 = stablehlo.convolution(%a, %b) dim_numbers = {dn},
        window = {{stride = {list(strides)}, pad = [{pad}],
                  lhs_dilate = {list(lhs_dil)}, rhs_dilate = {list(rhs_dil)},
                  reverse = [{rev}]}}
        {{batch_group_count = {bgc} : i64, feature_group_count = {fgc} : i64}}
        : ({lt}, {rt}) -> {ot}
    return %0 : {ot}
  }}"""


_CONV_CASES = [
    # ns, strides, padding, lhs_dil, rhs_dil, reversal, fgc, bgc
    (1, [1], [(0, 0)], [1], [1], [0], 1, 1),
    (1, [2], [(1, 2)], [1], [2], [1], 1, 1),
    (1, [1], [(-1, 1)], [2], [1], [0], 2, 1),
    (2, [2, 1], [(1, 0), (0, -1)], [1, 2], [2, 1], [1, 0], 1, 1),
    (2, [1, 2], [(0, 1), (2, 0)], [2, 1], [1, 1], [0, 1], 1, 2),
    (2, [1, 1], [(1, 1), (1, 1)], [1, 1], [1, 1], [0, 0], 3, 1),
    (3, [1, 2, 1], [(0, 1), (1, 0), (0, 0)], [1, 1, 2], [1, 2, 1], [1, 0, 1],
     1, 1),
]


@pytest.mark.parametrize("case", _CONV_CASES)
@pytest.mark.parametrize("dyn", [False, True])
def test_convolution_matches_the_spec_formula(case, dyn):
  ns, strides, padding, lhs_dil, rhs_dil, reversal, fgc, bgc = case
  rng = np.random.default_rng(ns * 7 + fgc)
  n, c, co = 2 * bgc, 2 * fgc, 2 * fgc * bgc
  sp = [5, 4, 3][:ns]
  ks = [2, 3, 2][:ns]
  lhs = rng.integers(-4, 5, (n, c) + tuple(sp)).astype(np.float32)
  rhs = rng.integers(-4, 5, (co, c // fgc) + tuple(ks)).astype(np.float32)
  want = _naive_conv(lhs, rhs, strides, padding, lhs_dil, rhs_dil, reversal,
                     fgc, bgc)
  src = _conv_src(lhs.shape, rhs.shape, want.shape, "f32", strides, padding,
                  lhs_dil, rhs_dil, reversal, fgc, bgc, dyn)
  args = [lhs, rhs] + ([np.array(padding, np.int64)] if dyn else [])
  (out,) = _run(src, *args)
  assert out.dtype == np.float32
  assert out.tolist() == want.tolist()


def test_convolution_layouts_and_integer_wraparound():
  # NHWC x HWIO -> NHWC with i8 sums that overflow.
  lhs = np.full((1, 2, 2, 3), 100, np.int8)
  rhs = np.ones((2, 2, 3, 1), np.int8)
  (out,) = _run("""
  func.func @main(%a: tensor<1x2x2x3xi8>, %b: tensor<2x2x3x1xi8>)
      -> tensor<1x1x1x1xi8> {
    %0 = stablehlo.convolution(%a, %b) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
        window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
        : (tensor<1x2x2x3xi8>, tensor<2x2x3x1xi8>) -> tensor<1x1x1x1xi8>
    return %0 : tensor<1x1x1x1xi8>
  }""", lhs, rhs)
  assert out.dtype == np.int8 and int(out.ravel()[0]) == ((1200 + 128) % 256
                                                          ) - 128


# --- chlo.ragged_dot -------------------------------------------------------------


def _ragged_src(ls, rs, gs, os_, lb, rb, lc, rc, lr, rg):
  return f"""
  func.func @main(%a: {_ts(ls, "f32")}, %b: {_ts(rs, "f32")},
                  %g: {_ts(gs, "i64")}) -> {_ts(os_, "f32")} {{
    %0 = "chlo.ragged_dot"(%a, %b, %g) {{
      ragged_dot_dimension_numbers = #chlo.ragged_dot<
        lhs_batching_dimensions = {list(lb)}, rhs_batching_dimensions = {list(rb)},
        lhs_contracting_dimensions = {list(lc)}, rhs_contracting_dimensions = {list(rc)},
        lhs_ragged_dimensions = {list(lr)}, rhs_group_dimensions = {list(rg)}>
    }} : ({_ts(ls, "f32")}, {_ts(rs, "f32")}, {_ts(gs, "i64")}) -> {_ts(os_, "f32")}
    return %0 : {_ts(os_, "f32")}
  }}"""


def test_ragged_dot_modes():
  rng = np.random.default_rng(5)
  lhs = rng.integers(-3, 4, (6, 4)).astype(np.float32)
  groups = np.array([2, 3, 0], np.int64)  # row 5 is in no group
  # Mode 1: [m, k] x [g, k, n] -> [m, n].
  rhs = rng.integers(-3, 4, (3, 4, 2)).astype(np.float32)
  (out,) = _run(_ragged_src((6, 4), (3, 4, 2), (3,), (6, 2), [], [], [1], [1],
                            [0], [0]), lhs, rhs, groups)
  gid = [0, 0, 1, 1, 1, None]
  want = np.stack([lhs[i] @ rhs[g] if g is not None else np.zeros(2)
                   for i, g in enumerate(gid)])
  assert out.tolist() == want.tolist()
  # Mode 2: ragged contracting dim -> [g, m, n].
  lhs2 = rng.integers(-3, 4, (2, 6)).astype(np.float32)
  rhs2 = rng.integers(-3, 4, (6, 3)).astype(np.float32)
  (out,) = _run(_ragged_src((2, 6), (6, 3), (3,), (3, 2, 3), [], [], [1], [0],
                            [1], []), lhs2, rhs2, groups)
  want = np.stack([lhs2[:, 0:2] @ rhs2[0:2], lhs2[:, 2:5] @ rhs2[2:5],
                   np.zeros((2, 3))])
  assert out.tolist() == want.tolist()
  # Mode 3: ragged batch dim -> a plain batched dot.
  lhs3 = rng.integers(-3, 4, (3, 2, 4)).astype(np.float32)
  rhs3 = rng.integers(-3, 4, (3, 4, 5)).astype(np.float32)
  (out,) = _run(_ragged_src((3, 2, 4), (3, 4, 5), (2,), (3, 2, 5), [0], [0],
                            [2], [1], [0], []), lhs3, rhs3,
                np.array([1, 2], np.int64))
  assert out.tolist() == np.matmul(lhs3, rhs3).tolist()


# --- fft ------------------------------------------------------------------------------


def _dft(x, axes, inverse=False):
  """Direct DFT (matrix products), one axis at a time."""
  x = x.astype(np.complex128)
  for ax in axes:
    n = x.shape[ax]
    k = np.arange(n)
    sign = 1 if inverse else -1
    mat = np.exp(sign * 2j * np.pi * np.outer(k, k) / n)
    x = np.moveaxis(np.tensordot(mat, np.moveaxis(x, ax, 0), axes=1), 0, ax)
    if inverse:
      x = x / n
  return x


def _fft_src(kind, ishape, oshape, ie, oe, length):
  return f"""
  func.func @main(%a: {_ts(ishape, ie)}) -> {_ts(oshape, oe)} {{
    %0 = stablehlo.fft %a, type = {kind}, length = {list(length)}
        : ({_ts(ishape, ie)}) -> {_ts(oshape, oe)}
    return %0 : {_ts(oshape, oe)}
  }}"""


def test_fft_kinds_against_a_direct_dft():
  rng = np.random.default_rng(7)
  x = (rng.standard_normal((2, 3, 5)) + 1j * rng.standard_normal(
      (2, 3, 5))).astype(np.complex128)
  (out,) = _run(_fft_src("FFT", x.shape, x.shape, "complex<f64>",
                         "complex<f64>", (3, 5)), x)
  np.testing.assert_allclose(out, _dft(x, (1, 2)), atol=1e-12)
  (out,) = _run(_fft_src("IFFT", x.shape, x.shape, "complex<f64>",
                         "complex<f64>", (5,)), x)
  np.testing.assert_allclose(out, _dft(x, (2,), inverse=True), atol=1e-12)
  r = rng.standard_normal((2, 4, 6)).astype(np.float32)
  (out,) = _run(_fft_src("RFFT", r.shape, (2, 4, 4), "f32", "complex<f32>",
                         (4, 6)), r)
  assert out.dtype == np.complex64
  np.testing.assert_allclose(out, _dft(r, (1, 2))[..., :4], atol=1e-4)
  # IRFFT of a Hermitian spectrum gives back the real signal.
  spec = _dft(r.astype(np.float64), (1, 2))[..., :4]
  (out,) = _run(_fft_src("IRFFT", (2, 4, 4), r.shape, "complex<f64>", "f64",
                         (4, 6)), spec)
  np.testing.assert_allclose(out, r, atol=1e-6)


# --- triangular_solve / cholesky ---------------------------------------------------------


@pytest.mark.parametrize("left,lower,unit,trans", list(itertools.product(
    [True, False], [True, False], [True, False],
    ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])))
def test_triangular_solve_solves_the_system(left, lower, unit, trans):
  rng = np.random.default_rng(11)
  n, k = 4, 3
  a = (rng.standard_normal((2, n, n)) + 1j * rng.standard_normal(
      (2, n, n)) + 4 * np.eye(n)).astype(np.complex128)
  bshape = (2, n, k) if left else (2, k, n)
  b = rng.standard_normal(bshape).astype(np.complex128)
  et = "complex<f64>"
  src = f"""
  func.func @main(%a: {_ts(a.shape, et)}, %b: {_ts(bshape, et)}) -> {_ts(bshape, et)} {{
    %0 = "stablehlo.triangular_solve"(%a, %b) {{left_side = {str(left).lower()},
        lower = {str(lower).lower()}, unit_diagonal = {str(unit).lower()},
        transpose_a = #stablehlo<transpose {trans}>}}
        : ({_ts(a.shape, et)}, {_ts(bshape, et)}) -> {_ts(bshape, et)}
    return %0 : {_ts(bshape, et)}
  }}"""
  (x,) = _run(src, a, b)
  tri = np.tril(a) if lower else np.triu(a)
  if unit:
    tri = tri - np.einsum("bii->bi", tri)[..., None] * np.eye(n) + np.eye(n)
  if trans == "TRANSPOSE":
    tri = np.swapaxes(tri, -1, -2)
  elif trans == "ADJOINT":
    tri = np.conj(np.swapaxes(tri, -1, -2))
  back = tri @ x if left else x @ tri
  np.testing.assert_allclose(back, b, atol=1e-10)


def _chol_src(shape, et, lower):
  return f"""
  func.func @main(%a: {_ts(shape, et)}) -> {_ts(shape, et)} {{
    %0 = "stablehlo.cholesky"(%a) {{lower = {str(lower).lower()}}}
        : ({_ts(shape, et)}) -> {_ts(shape, et)}
    return %0 : {_ts(shape, et)}
  }}"""


def test_cholesky_factorizes_and_flags_non_positive_definite_input():
  rng = np.random.default_rng(13)
  x = rng.standard_normal((3, 4, 4)) + 1j * rng.standard_normal((3, 4, 4))
  a = (x @ np.conj(np.swapaxes(x, -1, -2)) + 4 * np.eye(4)).astype(
      np.complex128)
  (l,) = _run(_chol_src(a.shape, "complex<f64>", True), a)
  np.testing.assert_allclose(l, np.tril(l))
  np.testing.assert_allclose(l @ np.conj(np.swapaxes(l, -1, -2)), a,
                             atol=1e-10)
  (u,) = _run(_chol_src(a.shape, "complex<f64>", False), a)
  np.testing.assert_allclose(u, np.triu(u))
  np.testing.assert_allclose(np.conj(np.swapaxes(u, -1, -2)) @ u, a,
                             atol=1e-10)
  # The spec example; only the lower triangle of the input is read.
  spec = np.array([[1, 99, 99], [2, 20, 99], [3, 26, 70]], np.float32)
  (l,) = _run(_chol_src((3, 3), "f32", True), spec)
  assert l.tolist() == [[1, 0, 0], [2, 4, 0], [3, 5, 6]]
  bad = np.stack([np.eye(2), -np.eye(2)]).astype(np.float64)
  (l,) = _run(_chol_src((2, 2, 2), "f64", True), bad)
  assert l[0].tolist() == np.eye(2).tolist() and np.isnan(l[1]).all()


# --- batch norm ---------------------------------------------------------------------------


def test_batch_norm_spec_examples():
  x = np.array([[[1.0, 2.0], [3.0, 4.0]], [[3.0, 4.0], [1.0, 2.0]]])
  ones = np.ones(2)
  t3, t1 = "tensor<2x2x2xf64>", "tensor<2xf64>"
  out, mean, var = _run(f"""
  func.func @main(%x: {t3}, %s: {t1}, %o: {t1}) -> ({t3}, {t1}, {t1}) {{
    %0:3 = "stablehlo.batch_norm_training"(%x, %s, %o) {{epsilon = 0.0 : f32,
        feature_index = 2 : i64}} : ({t3}, {t1}, {t1}) -> ({t3}, {t1}, {t1})
    return %0#0, %0#1, %0#2 : {t3}, {t1}, {t1}
  }}""", x, ones, ones)
  assert out.tolist() == [[[0, 0], [2, 2]], [[2, 2], [0, 0]]]
  assert mean.tolist() == [2, 3] and var.tolist() == [1, 1]
  (inf,) = _run(f"""
  func.func @main(%x: {t3}, %s: {t1}, %o: {t1}, %m: {t1}, %v: {t1}) -> {t3} {{
    %0 = "stablehlo.batch_norm_inference"(%x, %s, %o, %m, %v) {{
        epsilon = 0.0 : f32, feature_index = 2 : i64}}
        : ({t3}, {t1}, {t1}, {t1}, {t1}) -> {t3}
    return %0 : {t3}
  }}""", x, ones, ones, np.array([2.0, 3.0]), ones)
  assert inf.tolist() == out.tolist()
  gx, gs, go = _run(f"""
  func.func @main(%x: {t3}, %s: {t1}, %m: {t1}, %v: {t1}, %g: {t3})
      -> ({t3}, {t1}, {t1}) {{
    %0:3 = "stablehlo.batch_norm_grad"(%x, %s, %m, %v, %g) {{epsilon = 0.0 : f32,
        feature_index = 2 : i64}} : ({t3}, {t1}, {t1}, {t1}, {t3}) -> ({t3}, {t1}, {t1})
    return %0#0, %0#1, %0#2 : {t3}, {t1}, {t1}
  }}""", x, ones, np.array([2.0, 3.0]), ones, np.full((2, 2, 2), 0.1))
  np.testing.assert_allclose(gx, 0, atol=1e-12)
  np.testing.assert_allclose(gs, 0, atol=1e-12)
  np.testing.assert_allclose(go, [0.4, 0.4])


def test_batch_norm_training_statistics_in_f32():
  rng = np.random.default_rng(17)
  x = rng.standard_normal((3, 4, 5)).astype(np.float32)
  t3, t1 = "tensor<3x4x5xf32>", "tensor<4xf32>"
  sc = np.full(4, 2.0, np.float32)
  of = np.full(4, 0.5, np.float32)
  out, mean, var = _run(f"""
  func.func @main(%x: {t3}, %s: {t1}, %o: {t1}) -> ({t3}, {t1}, {t1}) {{
    %0:3 = "stablehlo.batch_norm_training"(%x, %s, %o) {{epsilon = 0.001 : f32,
        feature_index = 1 : i64}} : ({t3}, {t1}, {t1}) -> ({t3}, {t1}, {t1})
    return %0#0, %0#1, %0#2 : {t3}, {t1}, {t1}
  }}""", x, sc, of)
  x64 = x.astype(np.float64)
  m = x64.mean(axis=(0, 2))
  v = ((x64 - m[None, :, None])**2).mean(axis=(0, 2))
  want = 2 * (x64 - m[None, :, None]) / np.sqrt(v[None, :, None] + 0.001) + 0.5
  np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(var, v, rtol=1e-5)
  np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


# --- corpus ----------------------------------------------------------------------------------

_INTERPRET_FILES = ("dot_general.mlir", "convolution.mlir", "dynamic_conv.mlir",
                    "fft.mlir", "triangular_solve.mlir", "chlo/ragged_dot.mlir")
_TESTDATA_SAMPLE = (
    "dot_general_float32_4_3_float64_3_6.mlir",
    "dot_general_uint8_4_3_complex64_3_6.mlir",
    "conv_general_dilated_float32_2_3_9_float32_12_1_3.mlir",
    # RUN-DISABLED upstream ("no interpreter support"); ours runs them.
    "triangular_solve_float16_4_4_float16_4_1.mlir",
    "rng_bit_generator_uint32_4.mlir",
    "rng_bit_generator_uint64_2.mlir",
)


@pytest.mark.parametrize("name", _INTERPRET_FILES)
def test_interpret_corpus(name):
  assert corpus_testing.run_corpus_file("interpret", name) >= 1


@pytest.mark.parametrize("name", _TESTDATA_SAMPLE)
def test_testdata_sample(name):
  assert corpus_testing.run_corpus_file("testdata", name,
                                        disabled_ok=True) == 1
