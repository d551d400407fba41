"""Tests for the complex legalizations of chlo.asin / acos / asinh / acosh /
atan / atanh: the legalized program (run by the interpreter, which has no
CHLO left to run) against numpy's complex functions, over a grid that
covers the regions of the algorithms: tiny, near +-1, moderate and huge
parts of both signs."""

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import checks
from stablehlo._src.transforms import chlo_legalize
from support import env

_PARTS = (0.0, 1e-300, 1e-20, 1e-8, 0.1, 0.5, 0.9, 0.99999, 1.0, 1.00001,
          1.5, 2.0, 10.0, 1e8, 1e20, 1e160, 1e300)


def _grid() -> np.ndarray:
  vals = [complex(sr * a, si * b) for a in _PARTS for b in _PARTS
          for sr in (1, -1) for si in (1, -1)]
  rng = np.random.default_rng(0)
  rand = rng.normal(size=100) * 5 + 1j * rng.normal(size=100) * 5
  return np.concatenate([np.array(vals), rand])


_FUNCTIONS = {"asin": np.arcsin, "acos": np.arccos, "asinh": np.arcsinh,
              "acosh": np.arccosh, "atan": np.arctan, "atanh": np.arctanh}


def _run_legalized(name: str, x: np.ndarray, ty: str) -> np.ndarray:
  n = x.size
  module = text.parse_module(f"""
  func.func @main(%x: tensor<{n}x{ty}>) -> tensor<{n}x{ty}> {{
    %0 = chlo.{name} %x : tensor<{n}x{ty}> -> tensor<{n}x{ty}>
    return %0 : tensor<{n}x{ty}>
  }}""", "c.mlir")
  assert chlo_legalize.run(module)
  assert not any(op.dialect == "chlo" for op in module.walk())
  return interpreter.Interpreter(module).run("main", [x])[0]


def _ulps(got, want) -> np.ndarray:
  return np.maximum(checks.ulp_distance(got.real, want.real),
                    checks.ulp_distance(got.imag, want.imag))


@pytest.mark.parametrize("name", sorted(_FUNCTIONS))
def test_complex128_within_4_ulp_of_numpy(name):
  x = _grid()
  got = _run_legalized(name, x, "complex<f64>")
  with np.errstate(divide="ignore"):  # atanh(+-1) = +-inf
    want = _FUNCTIONS[name](x)
  d = _ulps(got, want)
  worst = int(np.argmax(d))
  assert d.max() <= 4, (x[worst], got[worst], want[worst])


@pytest.mark.parametrize("name", sorted(_FUNCTIONS))
def test_complex64_is_the_rounded_f64_result(name):
  # Inputs that fit in f32 (computed in f64, rounded once).
  x = _grid()
  x = x[(np.abs(x.real) < 1e30) & (np.abs(x.imag) < 1e30)].astype(
      np.complex64)
  got = _run_legalized(name, x, "complex<f32>")
  with np.errstate(divide="ignore"):
    want = _FUNCTIONS[name](x.astype(np.complex128)).astype(np.complex64)
  assert _ulps(got, want).max() <= 1


def test_special_values():
  x = np.array([0j, complex(-0.0, 0.0), 1 + 0j, -1 + 0j, 2 + 0j, complex(np.inf, 0),
                complex(0, np.inf), complex(np.inf, np.inf)], np.complex64)
  asin = _run_legalized("asin", x, "complex<f32>")
  # asin(2) = pi/2 + i log(2 + sqrt(3)); asin(+-inf, +-inf) has |Im| inf.
  np.testing.assert_allclose(asin[4], complex(np.pi / 2, np.log(2 + 3**0.5)),
                             rtol=1e-6)
  assert asin[0] == 0 and np.signbit(asin[1].real)
  np.testing.assert_allclose(asin[2:4].real, [np.pi / 2, -np.pi / 2])
  assert np.isinf(asin[5:].imag).all()
  atanh = _run_legalized("atanh", x, "complex<f32>")
  assert np.isposinf(atanh[2].real) and np.isneginf(atanh[3].real)
  np.testing.assert_allclose(atanh[6], complex(0, np.pi / 2), rtol=1e-6)


def test_real_operands_keep_their_rule():
  x = np.array([-0.5, 0.0, 0.25, 0.75], np.float32)
  got = _run_legalized("asin", x, "f32")
  np.testing.assert_allclose(got, np.arcsin(x), rtol=2e-7)


@pytest.mark.parametrize("name", ["asin_complex64_20_20_chlo.mlir",
                                  "atanh_complex128_20_20_chlo.mlir"])
def test_corpus_programs_pass_after_legalization(name):
  root = env.stablehlo_corpus("testdata")
  if root is None:
    pytest.skip(env.missing_corpus_reason("testdata"))
  from stablehlo._src.interpreter import conformance_run  # pylint: disable=g-import-not-at-top
  path = root / name
  module = text.parse_module(path.read_text(), str(path))
  assert chlo_legalize.run(module)
  conformance_run.run_case(text.print_module(module), str(path))
