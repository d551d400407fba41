"""Per-op status table generated from the op registry.

  python -m stablehlo.tools.status_table [--format md|csv] [--output FILE]
      [--load MODULE ...]
  python -m stablehlo.tools.status_table --where stablehlo.slice
      [--load xla.tools.op_locations]

Columns: op, spec (its section in the StableHLO spec, or "no"), verifier
(constraints checked / constraints in the spec), pretty syntax, interpreter,
HLO lowering, CPU codegen. The last columns read the registry slots that
later components fill by registration; `--load` imports extra modules that
register (e.g. a backend's lowering table) before the table is built.

`--where OP` prints, instead of the table, file:line of each registered
piece of one op: its verifier, type inference, pretty form, interpreter
kernel, HLO lowering, and, once `xla.tools.op_locations` is loaded (the
default when it can be imported), the HLO evaluator kernel and CPU emitter
of the opcode it lowers to.
"""

from __future__ import annotations

import argparse
import csv
import functools
import importlib
import inspect
import io
import os
import sys
from typing import Optional, Sequence

from stablehlo._src.ops import registry
from stablehlo._src.ops import spec_constraints

COLUMNS = ("op", "spec", "verifier", "pretty syntax", "interpreter",
           "HLO lowering", "CPU codegen")

# Modules of this package that register pretty forms / kernels when
# imported; missing ones are skipped (they arrive with later components).
DEFAULT_LOADS = (
    "stablehlo._src.text",
    "stablehlo._src.interpreter",
)


def _slot_cell(d: registry.OpDef, slot: str) -> str:
  if getattr(d, slot) is not None:
    return "yes"
  reason = d.unsupported.get(slot)
  return f"no ({reason})" if reason else "no"


def _verifier_cell(d: registry.OpDef) -> str:
  if d.spec is not None:
    total = len(spec_constraints.CONSTRAINTS.get(d.spec, ()))
    return f"{len(d.checks)}/{total}"
  return "yes" if d.verify is not None else "schema"


def rows() -> list[tuple[str, ...]]:
  """One row per registered op, sorted by name."""
  out = []
  for d in registry.all_ops():
    out.append((d.name, d.spec or "no", _verifier_cell(d), d.pretty or "no",
                _slot_cell(d, "interpreter"), _slot_cell(d, "hlo_lowering"),
                _slot_cell(d, "cpu_codegen")))
  return out


def summary() -> str:
  checked = total = 0
  for name in spec_constraints.SPEC_OPS:
    d = registry.lookup("stablehlo." + name)
    total += len(spec_constraints.CONSTRAINTS[name])
    checked += len(d.checks) if d is not None else 0
  n = len(registry.all_ops())
  return (f"{n} ops registered; {len(spec_constraints.SPEC_OPS)} spec ops; "
          f"{checked}/{total} spec constraints verified")


def render(fmt: str = "md") -> str:
  table = rows()
  if fmt == "csv":
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(table)
    return buf.getvalue()
  if fmt != "md":
    raise ValueError(f"unknown format {fmt!r}")
  lines = ["| " + " | ".join(COLUMNS) + " |",
           "|" + "|".join("---" for _ in COLUMNS) + "|"]
  lines += ["| " + " | ".join(r) + " |" for r in table]
  lines += ["", summary()]
  return "\n".join(lines) + "\n"


# Loaded for --where when present (xla is optional for this package).
WHERE_LOADS = ("xla.tools.op_locations",)


def _location(obj) -> str:
  """file:line (qualified name) of a function-like registration."""
  while isinstance(obj, functools.partial):
    obj = obj.func
  fn = inspect.unwrap(getattr(obj, "__func__", obj))
  try:
    path = inspect.getsourcefile(fn)
    line = inspect.getsourcelines(fn)[1]
  except (TypeError, OSError):
    return repr(obj)
  root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  if path and path.startswith(root + os.sep):
    path = os.path.relpath(path, root)
  name = getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))
  return f"{path}:{line} ({name})"


def where(name: str) -> str:
  """One line per registered piece of op `name` (see the module doc)."""
  d = registry.lookup(name)
  if d is None:
    raise KeyError(name)
  lines = [f"{d.name}" + (f"  (spec: {d.spec})" if d.spec else "")]
  lines.append(f"  verifier      {_location(d.verify) if d.verify else 'schema only'}")
  if d.infer is not None:
    lines.append(f"  type inference {_location(d.infer)}")
  form = None
  try:
    from stablehlo._src.text import pretty_ops  # pylint: disable=g-import-not-at-top
    form = pretty_ops.PRETTY_FORMS.get(name)
  except ImportError:
    pass
  if form is not None:
    lines.append(f"  pretty parse  {_location(form.parse)}")
    lines.append(f"  pretty print  {_location(form.print)}")
  for slot, label in (("interpreter", "interpreter  "),
                      ("hlo_lowering", "HLO lowering "),
                      ("hlo_evaluator", "HLO evaluator"),
                      ("cpu_codegen", "CPU emitter  ")):
    value = getattr(d, slot)
    if value is not None:
      lines.append(f"  {label} {_location(value)}")
    else:
      reason = d.unsupported.get(slot)
      lines.append(f"  {label} -" + (f" ({reason})" if reason else ""))
  return "\n".join(lines) + "\n"


def load(modules: Sequence[str], required: bool) -> None:
  for m in modules:
    try:
      importlib.import_module(m)
    except ModuleNotFoundError:
      if required:
        raise


def main(argv: Optional[Sequence[str]] = None) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m stablehlo.tools.status_table",
      description="Print the per-op status table (spec coverage of the "
      "verifier, pretty syntax, interpreter, HLO lowering, CPU codegen).")
  ap.add_argument("--format", choices=("md", "csv"), default="md",
                  help="output format (default: md)")
  ap.add_argument("--output", metavar="FILE",
                  help="write to FILE instead of stdout")
  ap.add_argument("--load", metavar="MODULE", action="append", default=[],
                  help="import MODULE first so its registrations show "
                  "(repeatable)")
  ap.add_argument("--where", metavar="OP",
                  help="print file:line of each registered piece of OP "
                  "(e.g. stablehlo.slice) instead of the table")
  args = ap.parse_args(argv)
  load(DEFAULT_LOADS, required=False)
  if args.where:
    load(WHERE_LOADS, required=False)
  try:
    load(args.load, required=True)
  except ModuleNotFoundError as e:
    print(f"error: cannot load module: {e}", file=sys.stderr)
    return 1
  if args.where:
    try:
      text = where(args.where)
    except KeyError:
      print(f"error: no op named {args.where!r} is registered",
            file=sys.stderr)
      return 1
  else:
    text = render(args.format)
  if args.output:
    with open(args.output, "w", encoding="utf-8") as f:
      f.write(text)
  else:
    sys.stdout.write(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
