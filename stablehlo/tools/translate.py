"""`stablehlo-translate`: parse MLIR text, verify it, then print it back or
interpret it.

  python -m stablehlo.tools.translate FILE [FILE ...] [--split-input-file]
      [--print-generic] [--print-locations] [--no-verify]
  python -m stablehlo.tools.translate --interpret [--split-input-file]
      [--args="[dense<1> : tensor<2xi32>, ...]"] [--interpreter-print-dense]
      [--probe-output-dir=DIR] [--max-while-iterations=N] [--timeout=S] FILE

  python -m stablehlo.tools.translate --serialize --target=X.Y.Z FILE > out.bc
  python -m stablehlo.tools.translate --deserialize out.bc

`--serialize` writes a portable artifact (VHLO bytecode at the target
version, `current` or `minimum` also accepted) to stdout or `-o`;
`--deserialize` reads one (or a raw jax.export `mlir_module_serialized`)
and prints the StableHLO module.
`--interpret` runs @main (or the only function) of each module and prints
its results; a failing check exits 1 naming the check and its location.
Diagnostics go to stderr as `file:line:col: error: ...` (no traceback) and
the exit status is 1.
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
  ap.add_argument("--split-input-file", "-split-input-file",
                  action="store_true",
                  help="treat each '// -----' separated chunk as its own "
                  "module")
  ap.add_argument("--print-generic", action="store_true",
                  help="print the generic operation form")
  ap.add_argument("--print-locations", action="store_true",
                  help="print op locations")
  ap.add_argument("--no-verify", action="store_true",
                  help="skip the StableHLO verifier (spec constraints)")
  sg = ap.add_argument_group("portable artifacts")
  sg.add_argument("--serialize", "-serialize", action="store_true",
                  help="write a portable artifact (VHLO bytecode)")
  sg.add_argument("--target", default="current", metavar="X.Y.Z",
                  help="StableHLO version of the artifact (default: "
                  "current); also 'minimum'")
  sg.add_argument("--strip-debuginfo", action="store_true",
                  help="drop locations from the artifact")
  sg.add_argument("--deserialize", "-deserialize", action="store_true",
                  help="read a portable artifact and print it")
  sg.add_argument("-o", "--output", default=None, metavar="FILE",
                  help="write the artifact here instead of stdout")
  sg.add_argument("--externalize-threshold", type=int, default=None,
                  metavar="BYTES", help="with --serialize: write constants "
                  "larger than BYTES to the --sidecar file")
  sg.add_argument("--sidecar", default=None, metavar="FILE",
                  help="the external-constants file written by --serialize "
                  "or read by --deserialize (format: "
                  "stablehlo/_src/vhlo/EXTERN_CONSTANTS.md)")
  g = ap.add_argument_group("interpreter")
  g.add_argument("--interpret", "-interpret", action="store_true",
                 help="run @main (or the only function) and print its "
                 "results")
  g.add_argument("--args", default=None, metavar="ATTRS",
                 help="arguments of the function: an array of dense "
                 "attributes, e.g. \"[dense<1> : tensor<2xi32>]\"")
  g.add_argument("--interpreter-print-dense", action="store_true",
                 help="print values as dense<...> attributes")
  g.add_argument("--probe-output-dir", default=None, metavar="DIR",
                 help="where interpreter.probe writes its .npy records")
  g.add_argument("--max-while-iterations", type=int, default=10_000_000,
                 metavar="N", help="stop a while loop after N iterations "
                 "(default: %(default)s; 0: no limit)")
  g.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                 help="wall-clock limit per module")
  args = ap.parse_args(argv)
  args.call_args = None
  if args.args is not None:
    if not args.interpret:
      ap.error("--args needs --interpret")
    from stablehlo._src.interpreter import cli_args  # pylint: disable=g-import-not-at-top
    try:
      args.call_args = cli_args.parse_args(args.args)
    except support.XlaError as e:
      print(f"error: {e}", file=sys.stderr)
      return 1
  if args.deserialize:
    return _deserialize(args)
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
    if args.serialize:
      ok = _serialize(module, args)
      failed |= not ok
      continue
    if args.interpret:
      text, ok = _interpret(module, path, src, args)
      failed |= not ok
      outputs.append(text)
      continue
    outputs.append(mlir_text.print_module(
        module, generic=args.print_generic,
        print_locations=args.print_locations))
  sep = "" if args.interpret else "// -----\n"
  try:
    sys.stdout.write(sep.join(outputs))
    sys.stdout.flush()
  except BrokenPipeError:  # e.g. piped into `head`
    sys.stderr.close()
  return not failed


def _serialize(module, args) -> bool:
  from stablehlo._src import vhlo  # pylint: disable=g-import-not-at-top
  try:
    extra = {}
    if args.externalize_threshold is not None or args.sidecar:
      extra = dict(externalize_threshold_bytes=args.externalize_threshold,
                   sidecar_path=args.sidecar)
    data = vhlo.serialize_portable_artifact(
        module, args.target, strip_debuginfo=args.strip_debuginfo, **extra)
  except support.XlaError as e:
    print(f"error: {e}", file=sys.stderr)
    return False
  try:
    if args.output:
      with open(args.output, "wb") as f:
        f.write(data)
    else:
      sys.stdout.buffer.write(data)
      sys.stdout.flush()
  except OSError as e:
    print(f"error: cannot write the artifact: {e}", file=sys.stderr)
    return False
  return True


def _deserialize(args) -> int:
  from stablehlo._src import vhlo  # pylint: disable=g-import-not-at-top
  failed = False
  for path in args.files:
    try:
      if path == "-":
        data = sys.stdin.buffer.read()
      else:
        with open(path, "rb") as f:
          data = f.read()
      module = vhlo.deserialize_portable_artifact(data,
                                                  sidecar_path=args.sidecar)
    except OSError as e:
      print(f"error: cannot read {path}: {e.strerror}", file=sys.stderr)
      failed = True
      continue
    except support.XlaError as e:
      print(f"{path}: error: {e}", file=sys.stderr)
      failed = True
      continue
    sys.stdout.write(mlir_text.print_module(
        module, generic=args.print_generic,
        print_locations=args.print_locations))
  return 1 if failed else 0


def _interpret(module, path, src, args) -> tuple[str, bool]:
  """Runs one module; returns (printed results, success)."""
  from stablehlo._src import interpreter  # pylint: disable=g-import-not-at-top
  from stablehlo._src.interpreter import printing  # pylint: disable=g-import-not-at-top
  opts = interpreter.Options(
      max_while_iterations=args.max_while_iterations or None,
      timeout_s=args.timeout, out=sys.stdout,
      probe_dir=args.probe_output_dir,
      print_dense=args.interpreter_print_dense)
  interp = interpreter.Interpreter(module, opts)
  if not any(op.name == "func.func" for op in module.body.operations):
    return "", True
  try:
    name = interp.entry_function()
    results = interp.run(name, args.call_args or ())
  except support.XlaError as e:
    msg = str(e)
    if not re.match(r"\S+:\d+:\d+: error: ", msg):
      msg = f"{path}: error: {msg}"
    print(_with_source_line(msg, path, src), file=sys.stderr)
    return "", False
  except RecursionError:
    print(f"{path}: error: the program recurses too deeply", file=sys.stderr)
    return "", False
  ok = True
  for msg in interp.soft_failures:
    print(_with_source_line(msg, path, src), file=sys.stderr)
    ok = False
  types = module.lookup(name).attr("function_type").value.results
  text = "".join(
      printing.format_value(v, ty, args.interpreter_print_dense) + "\n"
      for v, ty in zip(results, types))
  return text, ok


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
