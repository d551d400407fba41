"""`stablehlo-opt`: parse MLIR, run passes in command-line order, verify,
print.

  python -m stablehlo.tools.opt [--inline] [--chlo-legalize-to-stablehlo]
      [--stablehlo-legalize-composite-to-call] [--split-input-file]
      [--print-generic] FILE

Diagnostics go to stderr as `file:line:col: error: ...`; exit status 1.
"""

from __future__ import annotations

import argparse
import sys

from stablehlo._src import text as mlir_text
from stablehlo._src.ops import verify
from stablehlo._src.transforms import passes
import support


class _PassAction(argparse.Action):
  """Appends the pass name to `args.passes`, keeping command-line order."""

  def __call__(self, parser, namespace, values, option_string=None):
    namespace.passes = list(getattr(namespace, "passes", None) or [])
    namespace.passes.append(self.dest)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m stablehlo.tools.opt",
      description="Run StableHLO passes over an MLIR file and print it.")
  ap.add_argument("file", metavar="FILE", help="input .mlir ('-': stdin)")
  for name, (_, help_text) in passes.PASSES.items():
    ap.add_argument(f"--{name}", f"-{name}", dest=name, nargs=0,
                    action=_PassAction, help=help_text)
  ap.add_argument("--split-input-file", "-split-input-file",
                  action="store_true", help="handle each '// -----' "
                  "chunk as its own module")
  ap.add_argument("--print-generic", action="store_true",
                  help="print the generic op form")
  ap.set_defaults(passes=[])
  args = ap.parse_args(argv)
  try:
    src = sys.stdin.read() if args.file == "-" else open(
        args.file, encoding="utf-8", errors="surrogateescape").read()
  except OSError as e:
    print(f"error: cannot read {args.file}: {e.strerror}", file=sys.stderr)
    return 1
  if args.split_input_file:
    cases = [(c.text, c.first_line) for c in mlir_text.split_input_file(src)]
  else:
    cases = [(src, 0)]
  outputs, failed = [], False
  for case, offset in cases:
    try:
      module = mlir_text.parse_module(case, args.file, offset)
      verify.verify_module(module)
      for name in args.passes:
        passes.PASSES[name][0](module)
      verify.verify_module(module)
    except mlir_text.ParseError as e:
      print(e, file=sys.stderr)
      failed = True
      continue
    except support.XlaError as e:
      print(f"{e}", file=sys.stderr)
      failed = True
      continue
    outputs.append(mlir_text.print_module(module,
                                          generic=args.print_generic))
  try:
    sys.stdout.write("// -----\n".join(outputs))
    sys.stdout.flush()
  except BrokenPipeError:
    sys.stderr.close()
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
