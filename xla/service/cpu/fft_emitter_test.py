"""Tests for the fft kernel against the HLO evaluator and numpy.fft."""

import numpy as np
import pytest

from xla.service.cpu import fft_emitter  # pylint: disable=unused-import
from xla.service.cpu import op_emitter_testing as t

_RNG = np.random.default_rng(2)

_hlo = t.fft_module


def _cplx(shape, dtype):
  return t.complex_normal(_RNG, shape, dtype)


@pytest.mark.parametrize("length", [(8,), (5,), (1,), (3, 4), (2, 3, 5)])
@pytest.mark.parametrize("kind", ["FFT", "IFFT"])
def test_complex(kind, length):
  dims = (2,) + length
  x = _cplx(dims, np.complex128)
  text = _hlo(kind, "c128", dims, "c128", dims, length)
  got = t.run_instruction(text, [x])[0]
  axes = tuple(range(1, 1 + len(length)))
  want = (np.fft.fftn if kind == "FFT" else np.fft.ifftn)(x, axes=axes)
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  t.assert_same([got], t.evaluate(text, [x]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("length", [(8,), (7,), (3, 6), (2, 2, 5)])
def test_rfft_irfft_f32(length):
  dims = (3,) + length
  half = length[:-1] + (length[-1] // 2 + 1,)
  x = _RNG.standard_normal(dims).astype(np.float32)
  text = _hlo("RFFT", "f32", dims, "c64", (3,) + half, length)
  got = t.run_instruction(text, [x])[0]
  t.assert_same([got], t.evaluate(text, [x]), rtol=1e-5, atol=1e-5)
  axes = tuple(range(1, 1 + len(length)))
  np.testing.assert_allclose(got, np.fft.rfftn(x, axes=axes), rtol=1e-5,
                             atol=1e-5)
  y = _cplx((3,) + half, np.complex64)
  text = _hlo("IRFFT", "c64", (3,) + half, "f32", dims, length)
  got = t.run_instruction(text, [y])[0]
  t.assert_same([got], t.evaluate(text, [y]), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got, np.fft.irfftn(y, s=length, axes=axes),
                             rtol=1e-5, atol=1e-5)


def test_empty_lengths():
  text = _hlo("RFFT", "f64", (2, 0), "c128", (2, 1), (0,))
  got = t.run_instruction(text, [np.zeros((2, 0))])[0]
  np.testing.assert_array_equal(got, np.zeros((2, 1), np.complex128))
  text = _hlo("FFT", "c64", (0, 4), "c64", (0, 4), (4,))
  assert t.run_instruction(text, [np.zeros((0, 4), np.complex64)])[0].shape \
      == (0, 4)


# The library routines take every path at run time: batches of rows in
# groups (batch >= 2, one power-of-two axis), whole-axis radix-2 (inner
# rows > 1), grouped last axes of a block, direct DFTs, and both c2r forms.
@pytest.mark.parametrize("batch", [1, 3, 9])
@pytest.mark.parametrize("length", [(16,), (4, 8), (2, 4, 8), (3, 8),
                                    (8, 6), (1, 8)])
@pytest.mark.parametrize("ctype", [np.complex64, np.complex128])
def test_every_kind_against_numpy(ctype, length, batch):
  rtype = np.float32 if ctype == np.complex64 else np.float64
  cname, rname = ("c64", "f32") if ctype == np.complex64 else ("c128",
                                                                 "f64")
  tol = 2e-5 if ctype == np.complex64 else 1e-12
  dims = (batch,) + length
  axes = tuple(range(1, 1 + len(length)))
  half = (batch,) + length[:-1] + (length[-1] // 2 + 1,)
  x = _cplx(dims, ctype)
  for kind, fn in (("FFT", np.fft.fftn), ("IFFT", np.fft.ifftn)):
    got = t.run_instruction(_hlo(kind, cname, dims, cname, dims, length),
                            [x])[0]
    np.testing.assert_allclose(got, fn(x, axes=axes), rtol=tol, atol=tol)
  r = _RNG.standard_normal(dims).astype(rtype)
  got = t.run_instruction(_hlo("RFFT", rname, dims, cname, half, length),
                          [r])[0]
  np.testing.assert_allclose(got, np.fft.rfftn(r, axes=axes), rtol=tol,
                             atol=tol)
  y = _cplx(half, ctype)
  got = t.run_instruction(_hlo("IRFFT", cname, half, rname, dims, length),
                          [y])[0]
  np.testing.assert_allclose(got, np.fft.irfftn(y, s=length, axes=axes),
                             rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [2, 4, 64, 256])
@pytest.mark.parametrize("batch", [2, 11])
def test_batched_irfft_takes_the_row_groups(batch, n):
  # A batch of 1-d IRFFTs runs in vectorised groups of rows, like the other
  # kinds (it ran one row at a time, 2x slower than XLA's FFT library).
  half = n // 2 + 1
  y = _cplx((batch, half), np.complex64)
  k = t.compile_instruction(
      _hlo("IRFFT", "c64", (batch, half), "f32", (batch, n), (n,)))
  assert "fft_rows" in k.ir_text and "fft_block" not in k.ir_text
  assert k.spec.parallel_extent == -(-batch // fft_emitter.ROW_GROUP)
  np.testing.assert_allclose(k.run([y])[0], np.fft.irfft(y, n=n),
                             rtol=2e-5, atol=2e-5)
