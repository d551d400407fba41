"""Tests of elemental_complex.py: complex functions at special values.

XLA CPU's complex tan, tanh, exp, log, sqrt, sin, cos and log1p have their
own results where a part is +-inf or nan or zero (see `_tan`, `_tanh` and
the `_*_op` functions); the CPU backend, the HLO evaluator and the StableHLO
interpreter all follow them. The tables below hold results jax.jit gave on
CPU (jaxlib 0.10.2); the differential test checks a 13 x 13 grid against
jax when it is installed. (expm1 is left out: XLA computes its imaginary
part as (expm1(a) + 1) sin c, which loses accuracy for a << 0.)
"""

import itertools

import numpy as np
import pytest

from stablehlo import interpreter
from stablehlo import text as mlir_text
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

# (input, XLA CPU's tanh): +-1 + 0i (sign of sin 2c for a finite nonzero
# imaginary part c) where the real part is infinite, nan + nan i where the
# imaginary part is not finite, +0 imaginary parts for a +-0 one.
_TANH_TABLE = [
    (complex(INF, 1.0), complex(1.0, 0.0)),
    (complex(INF, 3.0), complex(1.0, -0.0)),
    (complex(-INF, -1.0), complex(-1.0, -0.0)),
    (complex(-INF, -0.0), complex(-1.0, 0.0)),
    (complex(INF, INF), complex(1.0, 0.0)),
    (complex(-INF, -INF), complex(-1.0, 0.0)),
    (complex(INF, NAN), complex(1.0, 0.0)),
    (complex(0.0, INF), complex(NAN, NAN)),
    (complex(-0.0, NAN), complex(NAN, NAN)),
    (complex(1.0, -INF), complex(NAN, NAN)),
    (complex(NAN, -0.0), complex(NAN, 0.0)),
    (complex(NAN, 1.0), complex(NAN, NAN)),
    (complex(-0.0, -0.0), complex(-0.0, 0.0)),
    (complex(30.0, -0.0), complex(1.0, 0.0)),
    (complex(-1e30, -0.0), complex(-1.0, 0.0)),
]

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 30.0, -30.0, 1e30, -1e30, INF,
            -INF, NAN]


# name -> (HLO opcode, StableHLO op, jax.numpy function name, table).
# (input, XLA CPU's value) for the other functions' special-value rules.
_OTHER_TABLE = {
    # exp: imaginary part +0 for c = +-0; nan + nan i for c = +-inf.
    "exp": [(complex(0.0, -0.0), complex(1.0, 0.0)),
            (complex(NAN, -0.0), complex(NAN, 0.0)),
            (complex(-INF, INF), complex(NAN, NAN))],
    # log: nan + nan i where a part is nan.
    "log": [(complex(INF, NAN), complex(NAN, NAN)),
            (complex(NAN, -INF), complex(NAN, NAN))],
    # sqrt: c = -0 counts as +0; nan + nan i where a part is nan.
    "sqrt": [(complex(-4.0, -0.0), complex(0.0, 2.0)),
             (complex(4.0, -0.0), complex(2.0, 0.0)),
             (complex(NAN, INF), complex(NAN, NAN))],
    # sin / cos: a = +-0 gives a +0 real / imaginary part.
    "sin": [(complex(-0.0, 0.0), complex(0.0, 0.0)),
            (complex(0.0, INF), complex(0.0, INF)),
            (complex(INF, 0.0), complex(NAN, NAN))],
    "cos": [(complex(0.0, -0.0), complex(1.0, 0.0)),
            (complex(-0.0, NAN), complex(NAN, 0.0)),
            (complex(NAN, 0.0), complex(NAN, NAN))],
    # log1p: imaginary part atan2(c, 1 + a), keeping c = -0's sign.
    "log1p": [(complex(-0.0, -0.0), complex(0.0, -0.0)),
              (complex(-INF, NAN), complex(NAN, NAN))],
}

# name -> (HLO opcode, StableHLO op, jax.numpy function name, table).
_OPS = {
    "tan": ("tan", "tan", "tan", _TABLE),
    "tanh": ("tanh", "tanh", "tanh", _TANH_TABLE),
    "exp": ("exponential", "exponential", "exp", _OTHER_TABLE["exp"]),
    "log": ("log", "log", "log", _OTHER_TABLE["log"]),
    "sqrt": ("sqrt", "sqrt", "sqrt", _OTHER_TABLE["sqrt"]),
    "sin": ("sine", "sine", "sin", _OTHER_TABLE["sin"]),
    "cos": ("cosine", "cosine", "cos", _OTHER_TABLE["cos"]),
    "log1p": ("log-plus-one", "log_plus_one", "log1p",
              _OTHER_TABLE["log1p"]),
}


def _hlo(n, ty, op):
  return f"""
HloModule {op}
ENTRY main {{
  x = {ty}[{n}] parameter(0)
  ROOT t = {ty}[{n}] {op}(x)
}}
"""


def _mlir(n, ty, op):
  return f"""
func.func @main(%x: tensor<{n}x{ty}>) -> tensor<{n}x{ty}> {{
  %0 = stablehlo.{op} %x : tensor<{n}x{ty}>
  return %0 : tensor<{n}x{ty}>
}}
"""


_TYPES = [(np.complex64, "c64", "complex<f32>"),
          (np.complex128, "c128", "complex<f64>")]
_CASES = [(name,) + ty for name in _OPS for ty in _TYPES]


def _ours(z, name, hlo_ty, mlir_ty):
  """{path: op(z)} for the CPU backend, the evaluator, the interpreter."""
  n = len(z)
  hlo_op, mlir_op = _OPS[name][:2]
  text = _hlo(n, hlo_ty, hlo_op)
  cpu = cpu_compiler.compile(
      hlo_parser.parse_and_return_verified_module(text)).execute([z])[0]
  evaluated = hlo_evaluator.HloEvaluator().evaluate(
      hlo_parser.parse_and_return_verified_module(text), [z])[0]
  module = mlir_text.parse_module(_mlir(n, mlir_ty, mlir_op))
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


@pytest.mark.parametrize("name,dtype,hlo_ty,mlir_ty", _CASES)
def test_special_values_table(name, dtype, hlo_ty, mlir_ty):
  table = _OPS[name][3]
  z = np.array([i for i, _ in table], dtype)
  for path, got in _ours(z, name, hlo_ty, mlir_ty).items():
    bad = [(z[i], got[i], w) for i, (_, w) in enumerate(table)
           if not _same(got[i], w, 0)]
    assert not bad, (name, path, bad)


@pytest.mark.parametrize("name,dtype,hlo_ty,mlir_ty", _CASES)
def test_grid_matches_xla_cpu(name, dtype, hlo_ty, mlir_ty):
  jax = pytest.importorskip("jax")
  z = np.array([complex(a, b) for a, b in itertools.product(_SPECIAL,
                                                            _SPECIAL)], dtype)
  with jax.enable_x64(True):
    cpu = jax.local_devices(backend="cpu")[0]
    fn = getattr(jax.numpy, _OPS[name][2])
    want = np.asarray(jax.jit(fn)(jax.device_put(z, cpu)))
  assert want.dtype == dtype
  rtol = 1e-5 if dtype == np.complex64 else 1e-12
  for path, got in _ours(z, name, hlo_ty, mlir_ty).items():
    # Tiny parts (|Im z| > 20 for tan) may flush to zero on one side only.
    bad = [(z[i], got[i], want[i]) for i in range(len(z))
           if not _same(got[i], want[i], rtol) and not _tiny_real_ok(
               got[i], want[i], rtol)]
    assert not bad, (name, path, bad)


def _tiny_real_ok(got, want, rtol):
  return (abs(got.real) < 1e-20 and abs(want.real) < 1e-20 and
          _same(complex(0, got.imag), complex(0, want.imag), rtol))
