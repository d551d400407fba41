"""Runs one conformance case the way `stablehlo-translate --interpret` does:
parse, verify, run @main (or the only function), fail on any check.

Shared by the conformance tool (`--mode interpret`) and the kernel tests.
"""

from __future__ import annotations

import io
from typing import Optional

from stablehlo._src import interpreter
from stablehlo._src import text as mlir_text
from stablehlo._src.interpreter import printing
from stablehlo._src.ops import verify


def run_case(src: str, filename: str = "<case>", line_offset: int = 0,
             options: Optional[interpreter.Options] = None,
             args=()) -> str:
  """Interprets one module; returns what it printed (results of the entry
  function, then anything `interpreter.print` wrote). Raises ParseError,
  VerificationError, InterpreterError / CheckFailure on failure; a
  `@check.eq` that returned false also fails the case here."""
  module = mlir_text.parse_module(src, filename, line_offset)
  verify.verify_module(module)
  opts = options or interpreter.Options()
  if opts.out is None:
    opts.out = io.StringIO()
  out = opts.out
  interp = interpreter.Interpreter(module, opts)
  if not any(op.name == "func.func" for op in module.body.operations):
    return ""  # an empty module: nothing to run
  name = interp.entry_function()
  results = interp.run(name, args)
  if interp.soft_failures:
    raise interpreter.CheckFailure(interp.soft_failures[0])
  fn = module.lookup(name)
  types = fn.attr("function_type").value.results
  for v, ty in zip(results, types):
    out.write(printing.format_value(v, ty, opts.print_dense) + "\n")
  return out.getvalue() if isinstance(out, io.StringIO) else ""
