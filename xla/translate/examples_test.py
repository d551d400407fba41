"""The bundled example programs (examples/*.mlir and the quick benchmark
programs) through CHLO / quantization legalization, the StableHLO -> HLO
import, the default HLO pass pipeline and the HLO evaluator give exactly
what the StableHLO reference interpreter gives on the same random inputs."""

import numpy as np
import pytest

from stablehlo import text
from stablehlo.interpreter import Interpreter
from stablehlo.interpreter import runtime
from support import env
from xla.hlo.evaluator import hlo_evaluator
from xla.tools import hlo_opt
from xla.translate import stablehlo_to_hlo as s2h


def _examples():
  root = env.source_root() / "examples"
  files = sorted(root.glob("*.mlir")) + sorted(
      (root / "bench").glob("*.quick.mlir"))
  return [pytest.param(f, id=str(f.relative_to(root))) for f in files]


def _random_args(module, name, rng):
  fty = module.lookup(name).attr("function_type").value
  args = []
  for ty in fty.inputs:
    dt = np.dtype(runtime.numpy_dtype(ty))
    shape = tuple(ty.shape)
    if dt.kind == "f":
      args.append(rng.standard_normal(shape).astype(dt))
    elif dt.kind == "b":
      args.append(rng.integers(0, 2, shape).astype(dt))
    else:
      args.append(rng.integers(0, 10, shape).astype(dt))
  return args


@pytest.mark.parametrize("path", _examples())
def test_example_matches_the_interpreter(path):
  src = path.read_text(encoding="utf-8")
  module = text.parse_module(src, str(path))
  interp = Interpreter(module)
  name = interp.entry_function()
  args = _random_args(module, name, np.random.default_rng(0))
  want = interp.run(name, args)
  hlo = s2h.legalize_and_import(text.parse_module(src, str(path)))
  hlo_opt.build_named_pipeline("default").run(hlo)
  got = hlo_evaluator.HloEvaluator().evaluate(hlo, args)
  assert len(got) == len(want)
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
