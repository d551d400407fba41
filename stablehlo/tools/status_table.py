"""Per-op status table generated from the op registry.

  python -m stablehlo.tools.status_table [--format md|csv] [--output FILE]
      [--load MODULE ...]

Columns: op, spec (its section in the StableHLO spec, or "no"), verifier
(constraints checked / constraints in the spec), pretty syntax, interpreter,
HLO lowering, CPU codegen. The last columns read the registry slots that
later components fill by registration; `--load` imports extra modules that
register (e.g. a backend's lowering table) before the table is built.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import io
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
  args = ap.parse_args(argv)
  load(DEFAULT_LOADS, required=False)
  try:
    load(args.load, required=True)
  except ModuleNotFoundError as e:
    print(f"error: cannot load module: {e}", file=sys.stderr)
    return 1
  text = render(args.format)
  if args.output:
    with open(args.output, "w", encoding="utf-8") as f:
      f.write(text)
  else:
    sys.stdout.write(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
