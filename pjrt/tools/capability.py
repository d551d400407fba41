"""`python -m pjrt.tools.capability`: which ops of a program a backend runs.

Answers per op "supported", "unsupported" or "maybe" (with the reason),
without compiling. See pjrt/_src/capability.py for where the answers come
from.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from typing import Any, Sequence

import support
from pjrt._src import capability
from pjrt.tools import plugin_choice
from stablehlo import text as mlir_text

EXIT_SUPPORTED = 0
EXIT_UNSUPPORTED = 1
EXIT_USAGE = 2
EXIT_MAYBE = 3

_DESCRIPTION = """\
Reports, for each op of each PROGRAM (StableHLO MLIR text or a portable
artifact; '-' reads stdin), whether a backend supports it: supported,
unsupported or maybe (support depends on custom_call targets, element types,
dynamic shapes, or the backend says nothing about itself). Nothing is
compiled.
"""

_EPILOG = """\
Where the answers come from (one of):
  (default)        our stack: the 'xla_cpu' source when one is registered
                   (--load a module that registers it), else 'interpreter'
                   (the StableHLO reference interpreter's op registry)
  --source NAME    a registered source
  --plugin X       the table of a PJRT plugin (a .so path, module:attribute
                   or a name pjrt knows): the source its 'capability_source'
                   attribute names; one that names none gets "maybe" for
                   every op
  --table FILE     a table in JSON (write one with --dump-table)

Exit status: 0 every op supported, 1 some op unsupported, 2 usage error or a
program that cannot be read, 3 nothing unsupported but some op "maybe".

Examples:
  python -m pjrt.tools.capability prog.mlir
  python -m pjrt.tools.capability --json --plugin path/to/plugin.so a.mlir
  python -m pjrt.tools.capability --dump-table > interpreter.json
"""


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="python -m pjrt.tools.capability", description=_DESCRIPTION,
      epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
      allow_abbrev=False)
  parser.add_argument("programs", nargs="*", metavar="PROGRAM",
                      help="StableHLO MLIR text or bytecode file; '-' = stdin")
  where = parser.add_mutually_exclusive_group()
  where.add_argument("--source", metavar="NAME",
                     help="a registered capability source")
  where.add_argument("--plugin", metavar="PLUGIN",
                     help="answer for this PJRT plugin: a .so path, a Python "
                     "plugin as module:attribute, or a name pjrt knows")
  where.add_argument("--table", metavar="FILE",
                     help="answer from a capability table in JSON")
  parser.add_argument("--load", metavar="MODULE", action="append",
                      default=[], help="import MODULE first (it may "
                      "register a capability source); repeatable")
  parser.add_argument("--json", action="store_true",
                      help="print JSON instead of tables")
  parser.add_argument("--summary-only", action="store_true",
                      help="print only the summary line of each program")
  parser.add_argument("--split-input-file", action="store_true",
                      help="treat each '// -----' separated part of a text "
                      "file as its own program")
  parser.add_argument("--timing", action="store_true",
                      help="report parse and query milliseconds")
  parser.add_argument("--dump-table", action="store_true",
                      help="print the chosen table as JSON and exit")
  return parser


def _absolute(path: str) -> str:
  # Under `bazel run` the process runs in the runfiles tree.
  base = os.environ.get("BUILD_WORKING_DIRECTORY") or os.getcwd()
  return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def _choose_table(args: argparse.Namespace) -> capability.CapabilityTable:
  """Raises support errors for a source, plugin or table that is missing."""
  if args.table:
    with open(_absolute(args.table), encoding="utf-8") as f:
      return capability.CapabilityTable.from_json(f.read())
  if args.source:
    return capability.source(args.source)
  if args.plugin:
    plugin = plugin_choice.load(plugin_choice.absolute(args.plugin))
    return capability.table_for_plugin(plugin)
  return capability.default_table()


def _read(path: str) -> bytes:
  if path == "-":
    return sys.stdin.buffer.read()
  with open(_absolute(path), "rb") as f:
    return f.read()


def _programs(path: str, data: bytes, split: bool) -> list[tuple[str, Any]]:
  """(label, program) pairs of one input."""
  if not split or data[:4] == b"ML\xefR":
    return [(path, data)]
  text = data.decode("utf-8", errors="replace")
  cases = mlir_text.split_input_file(text)
  if len(cases) == 1:
    return [(path, data)]
  # Keep line numbers of the original file: pad each case with newlines.
  return [(f"{path}#{i}", "\n" * case.first_line + case.text)
          for i, case in enumerate(cases)]


def _exit_status(statuses: Sequence[str]) -> int:
  if capability.UNSUPPORTED in statuses:
    return EXIT_UNSUPPORTED
  if capability.MAYBE in statuses:
    return EXIT_MAYBE
  return EXIT_SUPPORTED


def main(argv: Sequence[str] | None = None) -> int:
  parser = _parser()
  args = parser.parse_args(argv)
  for module in args.load:
    try:
      importlib.import_module(module)
    except ImportError as e:
      print(f"error: cannot load module {module}: {e}", file=sys.stderr)
      return EXIT_USAGE
  try:
    table = _choose_table(args)
  except (support.XlaError, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return EXIT_USAGE
  if args.dump_table:
    print(json.dumps(table.to_json(), indent=1))
    return 0
  if not args.programs:
    parser.print_usage(sys.stderr)
    print("error: no PROGRAM given", file=sys.stderr)
    return EXIT_USAGE
  results, statuses = [], []
  for path in args.programs:
    try:
      data = _read(path)
    except OSError as e:
      print(f"error: {path}: {e.strerror or e}", file=sys.stderr)
      return EXIT_USAGE
    for label, program in _programs(path, data, args.split_input_file):
      start = time.perf_counter()
      try:
        module = capability.load_program(
            program, filename=label if path != "-" else "<stdin>")
      except support.XlaError as e:
        print(f"error: {label}: {e}", file=sys.stderr)
        return EXIT_USAGE
      parsed = time.perf_counter()
      report = capability.query(module, table)
      done = time.perf_counter()
      statuses.append(report.status)
      timing = {"parse_ms": round(1e3 * (parsed - start), 3),
                "query_ms": round(1e3 * (done - parsed), 3)}
      if args.json:
        record = {"program": label, **report.to_json()}
        if args.timing:
          record["timing"] = timing
        results.append(record)
        continue
      if args.summary_only:
        print(f"{label}: {report.summary()}")
      else:
        print(f"== {label}")
        print(report.format_table())
      if args.timing:
        print(f"{label}: parse {timing['parse_ms']:.1f} ms, query "
              f"{timing['query_ms']:.2f} ms")
  status = _exit_status(statuses)
  if args.json:
    overall = capability.worst(
        capability.Verdict(s) for s in statuses).status
    json.dump({"source": table.name, "status": overall,
               "programs": results}, sys.stdout, indent=1)
    sys.stdout.write("\n")
  return status


if __name__ == "__main__":
  sys.exit(main())
