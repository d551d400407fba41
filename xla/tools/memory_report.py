r"""Buffer-assignment memory report: the bytes a program needs with buffer
reuse against every buffer in its own allocation, per program.

  python -m xla.tools.memory_report [FILE ...] [--pipeline=default]
  python -m xla.tools.hlo_opt FILE --pipeline=default --memory-report

FILE is StableHLO (`.mlir`) or HLO text; without files, the bundled
examples (examples/*.mlir, examples/*.hlo, examples/bench/*.mlir). Each
program is imported, run through the pass pipeline, scheduled by the memory
scheduler and assigned buffers (xla/service/buffer_assignment.py). Printed
per program: total bytes with reuse (parameters, constants, output and the
temporary heap), without reuse, their ratio, and the peak of live bytes
(a lower bound for any assignment under that schedule).
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
from typing import Optional

import support
from support import env


def report(module) -> dict:
  """`buffer_assignment.peak_memory_report` of an (optimized) module."""
  from xla.service import buffer_assignment  # pylint: disable=g-import-not-at-top
  return buffer_assignment.peak_memory_report(module)


def format_report(name: str, r: dict) -> str:
  """The multi-line report of one program."""
  return (
      f"memory report: {name}\n"
      f"  with reuse:       {r['total_with_reuse']} bytes (parameters "
      f"{r['parameter_bytes']}, constants {r['constant_bytes']}, output "
      f"{r['output_bytes']}, temporary heap {r['temp_heap_bytes']})\n"
      f"  without reuse:    {r['total_without_reuse']} bytes (temporaries "
      f"{r['temp_without_reuse']})\n"
      f"  ratio:            {r['ratio']:.3f} (with / without reuse)\n"
      f"  peak live:        {r['peak_live_bytes']} bytes\n"
      f"  in-place updates: {r['in_place_updates']}\n")


def default_files() -> list[pathlib.Path]:
  root = env.source_root() / "examples"
  files = sorted(root.glob("*.mlir")) + sorted(root.glob("*.hlo"))
  return files + sorted((root / "bench").glob("*.mlir"))


def program_report(path: str, pipeline: Optional[str] = "default") -> dict:
  """Reads, optimizes and assigns buffers of one program."""
  from xla.tools import hlo_module_reader  # pylint: disable=g-import-not-at-top
  from xla.tools import hlo_pass_registry  # pylint: disable=g-import-not-at-top
  text = pathlib.Path(path).read_text(encoding="utf-8",
                                      errors="surrogateescape")
  module = hlo_module_reader.read_module(path, text)
  if pipeline:
    hlo_pass_registry.build_named_pipeline(pipeline).run(module)
  else:
    from xla.service import hlo_verifier  # pylint: disable=g-import-not-at-top
    hlo_verifier.verify(module)
  return report(module)


def _display(path: pathlib.Path) -> str:
  try:
    return str(path.resolve().relative_to(env.source_root()))
  except ValueError:
    return str(path)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m xla.tools.memory_report")
  ap.add_argument("files", nargs="*", metavar="FILE")
  ap.add_argument("--pipeline", default="default",
                  help="hlo_opt pipeline to run first ('' for none)")
  args = ap.parse_args(argv)
  files = [pathlib.Path(f) for f in args.files] or default_files()
  rows = []
  failed = 0
  width = max([len(_display(f)) for f in files] + [7])
  print(f"{'program':{width}s}  {'with reuse':>12s}  {'no reuse':>12s}  "
        f"{'ratio':>6s}  {'peak live':>12s}")
  for f in files:
    name = _display(f)
    try:
      r = program_report(str(f), args.pipeline or None)
    except (support.XlaError, OSError) as e:
      failed += 1
      print(f"{name:{width}s}  error: {str(e).splitlines()[0]}")
      continue
    rows.append(r)
    print(f"{name:{width}s}  {r['total_with_reuse']:12d}  "
          f"{r['total_without_reuse']:12d}  {r['ratio']:6.3f}  "
          f"{r['peak_live_bytes']:12d}")
  if rows:
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows if r["ratio"] > 0)
                   / len(rows))
    print(f"{len(rows)} programs, geometric mean ratio {geo:.3f}"
          + (f", {failed} failed" if failed else ""))
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
