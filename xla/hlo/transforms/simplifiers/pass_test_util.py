"""Test helper: checks that a pass kept a module's meaning by running the
module before and after with the HLO evaluator on the same random inputs."""

from __future__ import annotations

import numpy as np

from xla import primitive_util
from xla.hlo.evaluator.hlo_evaluator import HloEvaluator


def random_args(module, seed: int = 0) -> list[np.ndarray]:
  """One random array per entry parameter (array parameters only)."""
  rng = np.random.default_rng(seed)
  args = []
  for p in module.entry_computation.parameter_instructions:
    shape = p.shape
    if not shape.is_array():
      raise ValueError(f"parameter {p.name} is not an array")
    dtype = primitive_util.numpy_dtype(shape.element_type)
    if primitive_util.is_integral(shape.element_type):
      value = rng.integers(-5, 6, shape.dimensions)
    elif shape.element_type.name == "PRED":
      value = rng.integers(0, 2, shape.dimensions)
    else:
      value = rng.uniform(-2.0, 2.0, shape.dimensions)
    args.append(np.asarray(value).astype(dtype))
  return args


def assert_same_results(before, after, seed: int = 0) -> None:
  """Evaluates both modules on the same inputs; results must agree."""
  args = random_args(before, seed)
  want = HloEvaluator().evaluate(before, args)
  got = HloEvaluator().evaluate(after, args)
  assert len(want) == len(got)
  for w, g in zip(want, got):
    assert w.shape == g.shape
    np.testing.assert_allclose(np.asarray(g, np.float64),
                               np.asarray(w, np.float64), rtol=1e-5,
                               atol=1e-5)
