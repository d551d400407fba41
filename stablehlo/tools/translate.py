"""Minimal `stablehlo-translate`: parse MLIR text, verify it, print it back.

  python -m stablehlo.tools.translate FILE [FILE ...] [--split-input-file]
      [--print-generic] [--print-locations] [--no-verify]

Diagnostics go to stderr as `file:line:col: error: ...` (no traceback) and
the exit status is 1. Further modes (--interpret, --serialize, ...) come
later.
"""

from __future__ import annotations

import argparse
import re
import sys

from stablehlo._src import text as mlir_text
from stablehlo._src.ops import verify
import support


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m stablehlo.tools.translate",
      description="Parse an MLIR file and print it (pretty or generic form).")
  ap.add_argument("files", nargs="+", metavar="FILE",
                  help="input .mlir file(s) ('-' for stdin)")
  ap.add_argument("--split-input-file", action="store_true",
                  help="treat each '// -----' separated chunk as its own "
                  "module")
  ap.add_argument("--print-generic", action="store_true",
                  help="print the generic operation form")
  ap.add_argument("--print-locations", action="store_true",
                  help="print op locations")
  ap.add_argument("--no-verify", action="store_true",
                  help="skip the StableHLO verifier (spec constraints)")
  args = ap.parse_args(argv)
  failed = False
  for path in args.files:
    failed |= not _translate_file(path, args)
  return 1 if failed else 0


def _translate_file(path: str, args) -> bool:
  """Translates one file; prints diagnostics; returns False on errors."""
  try:
    if path == "-":
      src = sys.stdin.read()
    else:
      with open(path, encoding="utf-8", errors="surrogateescape") as f:
        src = f.read()
  except OSError as e:
    print(f"error: cannot read {path}: {e.strerror}", file=sys.stderr)
    return False
  if args.split_input_file:
    cases = [(c.text, c.first_line) for c in mlir_text.split_input_file(src)]
  else:
    cases = [(src, 0)]
  outputs = []
  failed = False
  for case, offset in cases:
    try:
      module = mlir_text.parse_module(case, path, offset)
      if not args.no_verify:
        verify.verify_module(module)
    except mlir_text.ParseError as e:
      print(e, file=sys.stderr)
      failed = True
      continue
    except support.XlaError as e:
      print(_with_source_line(str(e), path, src), file=sys.stderr)
      failed = True
      continue
    outputs.append(mlir_text.print_module(
        module, generic=args.print_generic,
        print_locations=args.print_locations))
  try:
    sys.stdout.write("// -----\n".join(outputs))
    sys.stdout.flush()
  except BrokenPipeError:  # e.g. piped into `head`
    sys.stderr.close()
  return not failed


def _with_source_line(message: str, path: str, src: str) -> str:
  """Adds the offending source line and a caret to a `file:line:col: error`
  message (verifier errors carry the op's location, not the text)."""
  m = re.match(r"(.*?):(\d+):(\d+): error: ", message)
  if not m or m.group(1) != path:
    return message
  line, col = int(m.group(2)), int(m.group(3))
  lines = src.splitlines()
  if not 1 <= line <= len(lines):
    return message
  return f"{message}\n{lines[line - 1]}\n{' ' * (col - 1)}^"


if __name__ == "__main__":
  sys.exit(main())
