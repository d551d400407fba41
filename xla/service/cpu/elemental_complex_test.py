"""Tests of elemental_complex.py: complex tan at special values.

XLA CPU's complex tan has its own results where a part is +-inf or nan or
the real part is zero (see `_tan`); the CPU backend, the HLO evaluator and
the StableHLO interpreter all follow it. The table below holds results
jax.jit(jnp.tan) gave on CPU (jaxlib 0.10.2); the differential test checks
a whole grid against jax when it is installed.
"""

import itertools

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text as mlir_text
from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.parser import hlo_parser
from xla.service.cpu import cpu_compiler

INF, NAN = float("inf"), float("nan")

# (input, XLA CPU's tan): nan + nan i where the real part is not finite,
# +-1 i (real +0) where the imaginary part is infinite, +0 real parts for a
# -0 real input.
_TABLE = [
    (complex(INF, 30.0), complex(NAN, NAN)),
    (complex(-INF, -1e30), complex(NAN, NAN)),
    (complex(NAN, 30.0), complex(NAN, NAN)),
    (complex(INF, 0.0), complex(NAN, NAN)),
    (complex(NAN, -0.0), complex(NAN, NAN)),
    (complex(INF, INF), complex(0.0, 1.0)),
    (complex(-INF, -INF), complex(0.0, -1.0)),
    (complex(NAN, INF), complex(0.0, 1.0)),
    (complex(-1.0, INF), complex(-0.0, 1.0)),
    (complex(1.0, -INF), complex(0.0, -1.0)),
    (complex(0.0, NAN), complex(0.0, NAN)),
    (complex(-0.0, NAN), complex(0.0, NAN)),
    (complex(-0.0, 0.0), complex(0.0, 0.0)),
    (complex(-0.0, -0.0), complex(0.0, -0.0)),
    (complex(1.0, NAN), complex(NAN, NAN)),
]

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 30.0, -30.0, 1e30, -1e30, INF,
            -INF, NAN]


def _hlo(n, ty):
  return f"""
HloModule tan
ENTRY main {{
  x = {ty}[{n}] parameter(0)
  ROOT t = {ty}[{n}] tan(x)
}}
"""


def _mlir(n, ty):
  return f"""
func.func @main(%x: tensor<{n}x{ty}>) -> tensor<{n}x{ty}> {{
  %0 = stablehlo.tan %x : tensor<{n}x{ty}>
  return %0 : tensor<{n}x{ty}>
}}
"""


_TYPES = [(np.complex64, "c64", "complex<f32>"),
          (np.complex128, "c128", "complex<f64>")]


def _ours(z, hlo_ty, mlir_ty):
  """{path: tan(z)} for the CPU backend, the evaluator, the interpreter."""
  n = len(z)
  text = _hlo(n, hlo_ty)
  cpu = cpu_compiler.compile(
      hlo_parser.parse_and_return_verified_module(text)).execute([z])[0]
  evaluated = hlo_evaluator.HloEvaluator().evaluate(
      hlo_parser.parse_and_return_verified_module(text), [z])[0]
  module = mlir_text.parse_module(_mlir(n, mlir_ty))
  interpreted = interpreter.Interpreter(module).call("main", [z])[0]
  return {"cpu": cpu, "evaluator": evaluated, "interpreter": interpreted}


def _same(got, want, rtol):
  """Equal parts: nan to nan, zeros with their sign, else within rtol."""
  for g, w in ((got.real, want.real), (got.imag, want.imag)):
    if np.isnan(w):
      if not np.isnan(g):
        return False
    elif w == 0 or np.isinf(w):
      if g != w or np.signbit(g) != np.signbit(w):
        return False
    elif not abs(g - w) <= rtol * abs(w):
      return False
  return True


@pytest.mark.parametrize("dtype,hlo_ty,mlir_ty", _TYPES)
def test_tan_special_values_table(dtype, hlo_ty, mlir_ty):
  z = np.array([i for i, _ in _TABLE], dtype)
  for path, got in _ours(z, hlo_ty, mlir_ty).items():
    bad = [(z[i], got[i], w) for i, (_, w) in enumerate(_TABLE)
           if not _same(got[i], w, 0)]
    assert not bad, (path, bad)


@pytest.mark.parametrize("dtype,hlo_ty,mlir_ty", _TYPES)
def test_tan_grid_matches_xla_cpu(dtype, hlo_ty, mlir_ty):
  jax = pytest.importorskip("jax")
  z = np.array([complex(a, b) for a, b in itertools.product(_SPECIAL,
                                                            _SPECIAL)], dtype)
  with jax.enable_x64(True):
    cpu = jax.local_devices(backend="cpu")[0]
    want = np.asarray(jax.jit(jax.numpy.tan)(jax.device_put(z, cpu)))
  assert want.dtype == dtype
  rtol = 1e-5 if dtype == np.complex64 else 1e-12
  for path, got in _ours(z, hlo_ty, mlir_ty).items():
    # Tiny real parts (|y| > 20) may flush to zero on one side only.
    bad = [(z[i], got[i], want[i]) for i in range(len(z))
           if not _same(got[i], want[i], rtol) and not (
               abs(got[i].real) < 1e-20 and abs(want[i].real) < 1e-20 and
               _same(complex(0, got[i].imag), complex(0, want[i].imag),
                     rtol))]
    assert not bad, (path, bad)
