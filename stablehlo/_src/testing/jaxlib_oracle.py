"""jaxlib's bundled MLIR / StableHLO as a test oracle (tests only).

jaxlib 0.10.2 ships upstream StableHLO 1.17.0: its MLIR parser and printer,
its reference interpreter (`eval_module`) and its portable-artifact
serializer. Differential tests compare our implementation against it. Nothing
outside tests may import this module, and every user must skip cleanly when
jaxlib is not installed (`skip_reason()`).
"""

from __future__ import annotations

import functools
from typing import Optional


def skip_reason() -> Optional[str]:
  """None when the oracle is usable, else why not (for pytest.skip)."""
  try:
    import jax  # pylint: disable=g-import-not-at-top,unused-import
    from jaxlib.mlir.dialects import stablehlo  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError as e:
    return f"oracle jax/jaxlib not installed ({e}); see requirements-test.txt"
  return None


@functools.lru_cache(maxsize=None)
def ir_context():
  from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=g-import-not-at-top
  # JAX's own context has func, stablehlo, chlo, sdy, ml_program... loaded.
  return jax_mlir.make_ir_context()


def stablehlo_version() -> str:
  from jaxlib.mlir.dialects import stablehlo  # pylint: disable=g-import-not-at-top
  return stablehlo.get_current_version()


def parse(text: str):
  """Parses `text` with jaxlib. Returns (module, None) or (None, error)."""
  from jaxlib.mlir import ir  # pylint: disable=g-import-not-at-top
  try:
    return ir.Module.parse(text, ir_context()), None
  except ir.MLIRError as e:  # the only error jaxlib raises for bad input
    return None, str(e)


def print_module(module, generic: bool = False) -> str:
  """jaxlib's printed form of a parsed module, without locations."""
  return module.operation.get_asm(enable_debug_info=False,
                                  print_generic_op_form=generic)


def canonical_text(text: str, generic: bool = False) -> Optional[str]:
  """jaxlib's print of `text`, or None when jaxlib cannot parse it."""
  module, _ = parse(text)
  if module is None:
    return None
  return print_module(module, generic)
