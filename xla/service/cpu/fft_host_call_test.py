"""fft through the CPU compiler against the HLO evaluator and numpy.fft:
lengths that are not powers of two (above 16) through fft_host_call's
numpy pocketfft, the others through the generated kernel (radix-2)."""

import numpy as np
import pytest

from xla.service.cpu import cpu_testing as ct
from xla.service.cpu import fft_host_call
from xla.service.cpu import op_emitter_testing as t

_RNG = np.random.default_rng(3)

_hlo = t.fft_module


def _cplx(shape, dtype):
  return t.complex_normal(_RNG, shape, dtype)


def _run(text, args, length):
  module, exe = ct.compile_text(text)
  del module
  host = not fft_host_call.native_lengths(length)
  assert (fft_host_call.TARGET in exe.module.to_string()) == host
  return exe.execute(args)[0]


def test_which_lengths_stay_native():
  assert fft_host_call.native_lengths((256,))
  assert fft_host_call.native_lengths((3, 64))
  assert fft_host_call.native_lengths((16, 5))
  assert not fft_host_call.native_lengths((17,))
  assert not fft_host_call.native_lengths((64, 24))


@pytest.mark.parametrize("length", [(8,), (5,), (1,), (3, 4), (2, 3, 5),
                                    (17,), (3, 20), (64,), (256,),
                                    (8, 16, 32), (2, 24, 8)])
@pytest.mark.parametrize("kind", ["FFT", "IFFT"])
def test_complex(kind, length):
  dims = (2,) + length
  x = _cplx(dims, np.complex128)
  text = _hlo(kind, "c128", dims, "c128", dims, length)
  got = _run(text, [x], length)
  axes = tuple(range(1, 1 + len(length)))
  want = (np.fft.fftn if kind == "FFT" else np.fft.ifftn)(x, axes=axes)
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
  ct.assert_same([got], ct.HloEvaluator().evaluate(ct.parse(text), [x]),
                 rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("length", [(8,), (7,), (3, 6), (2, 2, 5), (18,),
                                    (64,), (4, 256), (32, 8), (5, 32)])
def test_rfft_irfft_f32(length):
  dims = (3,) + length
  half = length[:-1] + (length[-1] // 2 + 1,)
  axes = tuple(range(1, 1 + len(length)))
  x = _RNG.standard_normal(dims).astype(np.float32)
  text = _hlo("RFFT", "f32", dims, "c64", (3,) + half, length)
  got = _run(text, [x], length)
  assert got.dtype == np.complex64
  np.testing.assert_allclose(got, np.fft.rfftn(x, axes=axes), rtol=1e-5,
                             atol=1e-5)
  ct.assert_same([got], ct.HloEvaluator().evaluate(ct.parse(text), [x]),
                 rtol=1e-5, atol=1e-5)
  y = _cplx((3,) + half, np.complex64)
  text = _hlo("IRFFT", "c64", (3,) + half, "f32", dims, length)
  got = _run(text, [y], length)
  assert got.dtype == np.float32
  np.testing.assert_allclose(got, np.fft.irfftn(y, s=length, axes=axes),
                             rtol=1e-5, atol=1e-5)


def test_empty_lengths():
  text = _hlo("RFFT", "f64", (2, 0), "c128", (2, 1), (0,))
  got = _run(text, [np.zeros((2, 0))], (0,))
  np.testing.assert_array_equal(got, np.zeros((2, 1), np.complex128))


def test_disabling_the_pass_keeps_the_generated_kernel():
  x = _cplx((2, 20), np.complex64)
  text = _hlo("FFT", "c64", (2, 20), "c64", (2, 20), (20,))
  _, exe = ct.compile_text(text, disable_passes=("fft-to-host-call",))
  assert fft_host_call.TARGET not in exe.module.to_string()
  np.testing.assert_allclose(exe.execute([x])[0], np.fft.fft(x), rtol=1e-5,
                             atol=1e-5)
