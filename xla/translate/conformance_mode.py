"""The `hlo-evaluator` conformance mode: a StableHLO corpus case run through
CHLO legalization, the StableHLO -> HLO import and the HLO evaluator.

The `@check.*` custom calls of the testdata corpus are evaluated with the
interpreter's comparison masks and the corpus tolerances:
`check.expect_close` ULP <= 3, `check.expect_eq` exact,
`check.expect_almost_eq` 1e-3, `check.eq` returns a pred (ints exact,
floats 1e-4) and a false verdict fails the case after the run.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src import text as mlir_text
from stablehlo._src.interpreter import checks
from stablehlo._src.ir import attributes as a
from stablehlo._src.transforms import chlo_legalize
from xla.hlo.evaluator import hlo_evaluator
from xla.service import hlo_verifier
from xla.translate import stablehlo_to_hlo as s2h
from xla.translate import type_conversion as tc


class HloCheckFailure(AssertionError):
  """A `@check.*` custom call failed under the HLO evaluator."""


def _fail_if(instr, mask, what, actual, expected):
  if np.any(mask):
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    raise HloCheckFailure(
        f"{instr.custom_call_target} failed ({what}) at index {idx}: "
        f"got {np.asarray(actual)[idx]!r}, expected "
        f"{np.asarray(expected)[idx]!r} ({int(np.sum(mask))} of "
        f"{np.asarray(mask).size} elements differ)")


def check_handlers(soft_failures: list) -> dict:
  """custom_call_target -> handler for the testdata `@check.*` targets."""

  def expect_close(instr, args):
    _fail_if(instr, checks.close_mask(args[0], args[1],
                                      checks.TESTDATA_MAX_ULP),
             f"ULP distance <= {checks.TESTDATA_MAX_ULP}", args[0], args[1])
    return ()

  def expect_eq(instr, args):
    _fail_if(instr, checks.eq_mask(args[0], args[1]), "exact", args[0],
             args[1])
    return ()

  def expect_almost_eq(instr, args):
    tol = checks.TESTDATA_ALMOST_EQ_TOLERANCE
    _fail_if(instr, checks.almost_eq_mask(args[0], args[1], tol),
             f"tolerance {tol:g}", args[0], args[1])
    return ()

  def eq(instr, args):
    x = np.asarray(args[0])
    if x.dtype.kind in "iub":
      bad = checks.eq_mask(x, args[1])
    else:
      bad = checks.almost_eq_mask(x, args[1], checks.DEFAULT_TOLERANCE)
    if np.any(bad):
      soft_failures.append(f"check.eq failed ({int(np.sum(bad))} of "
                           f"{bad.size} elements differ)")
    return np.asarray(not np.any(bad), dtype=np.bool_)

  return {"check.expect_close": expect_close, "check.expect_eq": expect_eq,
          "check.expect_almost_eq": expect_almost_eq, "check.eq": eq}


def global_initial_values(module, hlo) -> list[np.ndarray]:
  """Initial values of the ml_program globals the import made parameters."""
  names = hlo.frontend_attributes.get(s2h.GLOBALS_ATTRIBUTE, "")
  values = []
  for name in filter(None, names.split(",")):
    g = module.lookup(name)
    value = g.attr("value")
    ty = g.attr("type")
    ty = ty.value if isinstance(ty, a.TypeAttr) else value.type
    values.append(tc.literal(value, ty).array)
  return values


def run_case(src: str, filename: str = "<case>", line_offset: int = 0
             ) -> list[np.ndarray]:
  """Runs one case; raises on a parse / import error or a failed check.
  Returns the entry's results."""
  module = mlir_text.parse_module(src, filename, line_offset)
  if not module.functions:
    return []
  chlo_legalize.run(module)
  hlo = s2h.stablehlo_to_hlo(module)
  hlo_verifier.verify(hlo)
  soft: list[str] = []
  evaluator = hlo_evaluator.HloEvaluator(custom_calls=check_handlers(soft))
  results = evaluator.evaluate(hlo, global_initial_values(module, hlo))
  if soft:
    raise HloCheckFailure(f"{filename}: {soft[0]}")
  return results
