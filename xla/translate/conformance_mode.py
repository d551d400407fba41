"""The HLO conformance mode: a StableHLO corpus case run through CHLO
legalization, quantized-type legalization, the StableHLO -> HLO import, an
optional HLO pass pipeline and an execution backend (the HLO evaluator by
default).

The `@check.*` custom calls of the testdata corpus are evaluated with the
interpreter's comparison masks and the corpus tolerances:
`check.expect_close` ULP <= 3, `check.expect_eq` exact,
`check.expect_almost_eq` 1e-3, `check.eq` returns a pred (ints exact,
floats 1e-4) and a false verdict fails the case after the run. The check
dialect ops (`check.expect_eq_const`, `check.expect_almost_eq[_const]`,
`check.expect_close`) arrive as the same custom calls with their own
tolerances (default 1e-4, ULP 0) in `backend_config`.
"""

from __future__ import annotations

import json
from typing import Callable, Optional, Sequence

import numpy as np

from stablehlo import attributes as a
from stablehlo import text as mlir_text
from stablehlo.interpreter import checks
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


def _config(instr) -> dict:
  """The check parameters the importer put in `backend_config` (JSON)."""
  text = getattr(instr, "backend_config", "") or ""
  if not text.strip().startswith("{"):
    return {}
  try:
    return json.loads(text)
  except ValueError:
    return {}


def check_handlers(soft_failures: list) -> dict:
  """custom_call_target -> handler for the `check.*` targets: the testdata
  `@check.*` custom calls, and the check dialect ops the importer turns
  into them (their tolerances in `backend_config`)."""

  def expect_close(instr, args):
    cfg = _config(instr)
    hi = int(cfg.get("max_ulp_difference", checks.TESTDATA_MAX_ULP))
    lo = int(cfg.get("min_ulp_difference", 0))
    what = (f"ULP distance <= {hi}" if lo == 0 else
            f"ULP distance in [{lo}, {hi}]")
    _fail_if(instr, checks.close_mask(args[0], args[1], hi, lo), what,
             args[0], args[1])
    return ()

  def expect_eq(instr, args):
    _fail_if(instr, checks.eq_mask(args[0], args[1]), "exact", args[0],
             args[1])
    return ()

  def expect_almost_eq(instr, args):
    tol = float(_config(instr).get("tolerance",
                                   checks.TESTDATA_ALMOST_EQ_TOLERANCE))
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


# fn(hlo_module, args, custom_calls) -> flat list of result arrays.
Backend = Callable[[object, Sequence[np.ndarray], dict], list]


def evaluator_backend(hlo, args, custom_calls) -> list:
  """Runs `hlo` with the HLO evaluator."""
  return hlo_evaluator.HloEvaluator(custom_calls=custom_calls).evaluate(
      hlo, args)


def import_case(src: str, filename: str = "<case>", line_offset: int = 0):
  """Parses a case and imports it to HLO: (stablehlo module, HloModule),
  or (module, None) for a module without functions."""
  module = mlir_text.parse_module(src, filename, line_offset)
  if not module.functions:
    return module, None
  hlo = s2h.legalize_and_import(module)
  hlo_verifier.verify(hlo)
  return module, hlo


def run_case(src: str, filename: str = "<case>", line_offset: int = 0, *,
             pipeline=None, backend: Optional[Backend] = None
             ) -> list[np.ndarray]:
  """Runs one case; raises on a parse / import / pass error or a failed
  check. `pipeline` (an HLO pass, usually an HloPassPipeline that verifies
  after every pass) runs between import and execution; `backend` executes
  the module (default: the HLO evaluator). Returns the entry's results."""
  module, hlo = import_case(src, filename, line_offset)
  if hlo is None:
    return []
  if pipeline is not None:
    pipeline.run(hlo)
  soft: list[str] = []
  run = backend or evaluator_backend
  results = run(hlo, global_initial_values(module, hlo),
                check_handlers(soft))
  if soft:
    raise HloCheckFailure(f"{filename}: {soft[0]}")
  return results
