"""Tests for the cholesky and triangular-solve kernels against the HLO
evaluator and numpy."""

import itertools

import numpy as np
import pytest

import support
from xla.service.cpu import linalg_emitter  # pylint: disable=unused-import
from xla.service.cpu import op_emitter_testing as t

_RNG = np.random.default_rng(5)
_TY = {np.float32: "f32", np.float64: "f64", np.complex64: "c64",
       np.complex128: "c128"}
_TOL = {np.float32: 2e-4, np.float64: 1e-11, np.complex64: 2e-4,
        np.complex128: 1e-11}


def _f(s):
  return ",".join(str(x) for x in s)


def _random(shape, dtype):
  x = _RNG.standard_normal(shape)
  if np.dtype(dtype).kind == "c":
    x = x + 1j * _RNG.standard_normal(shape)
  return x.astype(dtype)


def _spd(batch, n, dtype):
  x = _random(batch + (n, n), dtype)
  a = x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n, dtype=dtype)
  return a.astype(dtype)


def _chol_hlo(ty, dims, lower):
  return f"""HloModule m
ENTRY e {{
  a = {ty}[{_f(dims)}] parameter(0)
  ROOT c = {ty}[{_f(dims)}] cholesky(a), lower={lower}
}}"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64,
                                   np.complex128])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky(dtype, lower):
  a = _spd((2, 3), 6, dtype)
  # Garbage in the triangle that must not be read.
  junk = np.triu(np.full((6, 6), 7.0), 1).astype(dtype)
  a_in = a + (junk if lower else junk.T)
  text = _chol_hlo(_TY[dtype], (2, 3, 6, 6), str(lower).lower())
  got = t.run_instruction(text, [a_in])[0]
  want = t.evaluate(text, [a_in])[0]
  t.assert_same([got], [want], rtol=_TOL[dtype], atol=_TOL[dtype])
  l = np.linalg.cholesky(a)
  np.testing.assert_allclose(got, l if lower else np.conj(
      np.swapaxes(l, -1, -2)), rtol=_TOL[dtype] * 10, atol=_TOL[dtype] * 10)


def test_cholesky_not_positive_definite_is_nan():
  a = np.stack([np.eye(3), -np.eye(3)]).astype(np.float32)
  text = _chol_hlo("f32", (2, 3, 3), "true")
  got = t.run_instruction(text, [a])[0]
  np.testing.assert_array_equal(got[0], np.eye(3))
  assert np.isnan(got[1]).all()
  t.assert_same([got], t.evaluate(text, [a]))


def test_cholesky_in_place_and_unsupported_type():
  a = _spd((), 5, np.float64)
  text = _chol_hlo("f64", (5, 5), "true")
  k = t.compile_instruction(text)
  x = a.copy()
  k.call([x], [(0, 1)], results=[x])
  np.testing.assert_allclose(x, np.linalg.cholesky(a), rtol=1e-12)
  with pytest.raises(support.UnimplementedError):
    t.compile_instruction(_chol_hlo("f16", (3, 3), "true"))


def _ts_hlo(ty, a_dims, b_dims, left, lower, unit, trans):
  return f"""HloModule m
ENTRY e {{
  a = {ty}[{_f(a_dims)}] parameter(0)
  b = {ty}[{_f(b_dims)}] parameter(1)
  ROOT x = {ty}[{_f(b_dims)}] triangular-solve(a, b), left_side={left}, lower={lower}, unit_diagonal={unit}, transpose_a={trans}
}}"""


def _tri_matrix(batch, m, dtype):
  a = _random(batch + (m, m), dtype) * 0.3
  idx = np.arange(m)
  a[..., idx, idx] = (2.0 + _RNG.random(batch + (m,))).astype(dtype)
  return a


@pytest.mark.parametrize("left,lower,unit,trans", list(itertools.product(
    [True, False], [True, False], [True, False],
    ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])))
def test_triangular_solve_all_variants(left, lower, unit, trans):
  dtype = np.complex64 if trans == "ADJOINT" else np.float64
  m, n = 5, 3
  a = _tri_matrix((2,), m, dtype)
  b_dims = (2, m, n) if left else (2, n, m)
  bmat = _random(b_dims, dtype)
  text = _ts_hlo(_TY[dtype], (2, m, m), b_dims, str(left).lower(),
                 str(lower).lower(), str(unit).lower(), trans)
  got = t.run_instruction(text, [a, bmat])[0]
  want = t.evaluate(text, [a, bmat])[0]
  t.assert_same([got], [want], rtol=_TOL[dtype], atol=_TOL[dtype])
  # Independent check: op(tri(A)) X = B or X op(tri(A)) = B.
  tri = np.tril(a) if lower else np.triu(a)
  if unit:
    tri = tri.copy()
    tri[..., np.arange(m), np.arange(m)] = 1
  op = {"NO_TRANSPOSE": tri, "TRANSPOSE": np.swapaxes(tri, -1, -2),
        "ADJOINT": np.conj(np.swapaxes(tri, -1, -2))}[trans]
  res = op @ got if left else got @ op
  np.testing.assert_allclose(res, bmat, rtol=1e-4, atol=1e-4)


def test_triangular_solve_f32_large_batch_in_place():
  m, n = 7, 4
  a = _tri_matrix((3, 2), m, np.float32)
  bmat = _random((3, 2, m, n), np.float32)
  text = _ts_hlo("f32", (3, 2, m, m), (3, 2, m, n), "true", "true", "false",
                 "NO_TRANSPOSE")
  got = t.run_instruction(text, [a, bmat])[0]
  t.assert_same([got], t.evaluate(text, [a, bmat]), rtol=1e-4, atol=1e-5)
  k = t.compile_instruction(text)
  x = bmat.copy()
  k.call([a, x], [(0, k.spec.parallel_extent)], results=[x])
  np.testing.assert_array_equal(x, got)
