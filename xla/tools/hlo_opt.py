"""`hlo-opt`: parse an HLO module, run passes, verify, print or draw it.

  python -m xla.tools.hlo_opt FILE [--passes=dce,cse,algsimp,...]
      [--pipeline=default] [--dump-to=DIR] [--format=text|dot|html]
      [--computation=NAME] [--no-expand-fusions] [-o OUT] [--list-passes]
      [--show-before] [--memory-report]

With --show-before the module is printed as read, then after the passes:
`--passes=spmd-partitioning --show-before` shows a global program with
shardings (`num_partitions=N` in its header) before and after SPMD
partitioning (examples/spmd_mlp.hlo is one).

With --memory-report the output is, instead of the module, its buffer
assignment summary after the passes (xla/tools/memory_report.py): bytes with
buffer reuse, without, their ratio and the peak of live bytes.

FILE is HLO text (`.hlo`, `.txt`, anything else), a binary HloModuleProto
(`.pb`), or StableHLO MLIR (`.mlir`)
when the StableHLO -> HLO importer (xla/translate/stablehlo_to_hlo.py) is
present. '-' reads HLO text from stdin.

Passes are found through `PASSES` (hlo_pass_registry.py), a table of short
name -> where the pass class lives; modules are imported only when a pass is
used, so a pass whose module does not exist (yet) is reported as "not
available" instead of breaking the tool. `--pipeline=cpu` runs the CPU
compiler's own pipeline (`cpu_compiler.cpu_pipeline`). `--passes` runs the named passes in order (after
`--pipeline`'s, if both are given) inside one HloPassPipeline, which runs the
verifier before the first and after every pass.

Exit status: 0 success; 1 bad input (unreadable file, parse or verifier
error, a pass rejected the module); 2 bad usage (unknown or unavailable
pass, bad flag); 3 an internal error (a bug in a pass or the importer).
Errors go to stderr as `FILE:LINE:COL: error: ...` where a position is
known; bad input never prints a Python traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

import support
from support import flags
# The pass table and the module reader, re-exported (tools and tests use
# them through hlo_opt).
from xla.tools.hlo_module_reader import read_module as read_module
from xla.tools.hlo_pass_registry import CPU_PIPELINE
from xla.tools.hlo_pass_registry import PASSES as PASSES
from xla.tools.hlo_pass_registry import PIPELINES as PIPELINES
from xla.tools.hlo_pass_registry import PassEntry as PassEntry
from xla.tools.hlo_pass_registry import PassNotAvailable as PassNotAvailable
from xla.tools.hlo_pass_registry import build_named_pipeline as build_named_pipeline
from xla.tools.hlo_pass_registry import cpu_pass_names
from xla.tools.hlo_pass_registry import build_pipeline as _build_pipeline
from xla.tools.hlo_pass_registry import load_pass as load_pass
from xla.tools.hlo_pass_registry import pass_available as pass_available
from xla.tools.hlo_pass_registry import pipeline_names

_USAGE_ERROR = 2
_INPUT_ERROR = 1
_INTERNAL_ERROR = 3


def _split_names(text: str) -> list[str]:
  return [n.strip() for n in text.split(",") if n.strip()]


def _render(module, fmt: str, computation_name: Optional[str],
            expand_fusions: bool) -> str:
  if fmt == "text":
    return module.to_string() + "\n"
  from xla.tools import graph_dump  # pylint: disable=g-import-not-at-top
  if computation_name:
    comp = module.get_computation_with_name(computation_name)
    if comp is None:
      raise support.NotFoundError(
          f"no computation named '{computation_name}' in module "
          f"'{module.name}'; it has: "
          + ", ".join(c.name for c in module.computations))
  else:
    comp = module.entry_computation
  graph = graph_dump.build_graph(comp, expand_fusions=expand_fusions)
  if fmt == "dot":
    return graph_dump.to_dot(graph)
  return graph_dump.to_html(graph, heading=f"{module.name}: {comp.name}")


def _arg_parser() -> "argparse.ArgumentParser":
  import argparse  # pylint: disable=g-import-not-at-top
  ap = argparse.ArgumentParser(
      prog="python -m xla.tools.hlo_opt",
      description="Run HLO passes over a module, verify it, and print it as "
      "HLO text, Graphviz DOT or a self-contained HTML/SVG page.",
      epilog="passes: " + ", ".join(sorted(PASSES)) + "; pipelines: "
      + ", ".join(pipeline_names()) + ". See --list-passes.")
  ap.add_argument("file", metavar="FILE", nargs="?",
                  help="HLO text, or StableHLO .mlir; '-' reads stdin")
  ap.add_argument("--passes", default="",
                  help="comma-separated pass names, run in order")
  ap.add_argument("--pipeline", choices=pipeline_names(),
                  help="a named pass list, run before --passes (passes not "
                  f"available yet are skipped); '{CPU_PIPELINE}' is the CPU "
                  "compiler's own pipeline")
  ap.add_argument("--dump-to", metavar="DIR",
                  help="write the module text after every pass to DIR "
                  "(--xla_dump_to)")
  ap.add_argument("--format", choices=("text", "dot", "html"),
                  default="text", help="output format (default: text)")
  ap.add_argument("--computation", metavar="NAME",
                  help="for dot/html: the computation to draw (default: "
                  "the entry)")
  ap.add_argument("--no-expand-fusions", dest="expand_fusions",
                  action="store_false",
                  help="for dot/html: draw fusions as single nodes")
  ap.add_argument("-o", "--output", metavar="OUT",
                  help="write here instead of stdout")
  ap.add_argument("--list-passes", action="store_true",
                  help="list the passes and whether each is available")
  ap.add_argument("--show-before", action="store_true",
                  help="text format: print the module as read first, then "
                  "the module after the passes (e.g. before and after "
                  "--passes=spmd-partitioning)")
  ap.add_argument("--memory-report", action="store_true",
                  help="print the buffer assignment's memory use (with and "
                  "without reuse, peak live bytes) instead of the module")
  return ap


def _list_passes(out) -> None:
  for name in sorted(PASSES):
    reason = pass_available(name)
    state = "available" if reason is None else "not available"
    out.write(f"{name:22s} {state:14s} {PASSES[name].help}\n")
  for name, names in sorted(PIPELINES.items()):
    out.write(f"pipeline {name}: {','.join(names)}\n")
  out.write(f"pipeline {CPU_PIPELINE}: {','.join(cpu_pass_names())} "
            "(the CPU compiler's)\n")


def main(argv=None, stdout=None, stderr=None) -> int:
  stdout = stdout or sys.stdout
  stderr = stderr or sys.stderr
  ap = _arg_parser()
  try:
    args = ap.parse_args(argv)
  except SystemExit as e:  # argparse printed usage or --help
    return int(e.code or 0)
  if args.list_passes:
    _list_passes(stdout)
    return 0
  if not args.file:
    ap.print_usage(stderr)
    stderr.write("error: FILE is required\n")
    return _USAGE_ERROR

  def fail(code: int, message: str) -> int:
    stderr.write(message.rstrip("\n") + "\n")
    return code

  if args.show_before and (args.format != "text" or args.memory_report):
    return fail(_USAGE_ERROR, "error: --show-before prints HLO text; it "
                "takes neither --format=dot/html nor --memory-report")

  # Assemble the pass list before reading input: usage errors come first.
  pass_names: list[str] = []
  if args.pipeline and args.pipeline != CPU_PIPELINE:
    for name in PIPELINES[args.pipeline]:
      reason = pass_available(name)
      if reason is None:
        pass_names.append(name)
      else:
        stderr.write(f"note: pipeline '{args.pipeline}': skipping {reason}\n")
  pass_names.extend(_split_names(args.passes))
  try:
    if args.pipeline == CPU_PIPELINE:
      pipeline = build_named_pipeline(CPU_PIPELINE)
      pipeline.verify = True  # after every pass, as for any other pipeline
      for name in pass_names:
        pipeline.add_pass(load_pass(name))
    else:
      pipeline = _build_pipeline(pass_names, args.pipeline or "hlo-opt")
  except support.NotFoundError as e:
    return fail(_USAGE_ERROR, f"error: {e}")

  try:
    if args.file == "-":
      text, path = sys.stdin.read(), "<stdin>"
    else:
      path = args.file
      if path.endswith(".pb"):  # a binary HloModuleProto
        with open(path, "rb") as f:
          text = f.read()
      else:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
          text = f.read()
  except OSError as e:
    return fail(_INPUT_ERROR, f"error: cannot read {args.file}: {e.strerror}")

  try:
    module = read_module(path, text)
    before = (module.to_string().rstrip("\n") + "\n" if args.show_before
              else None)
    overrides: dict[str, Any] = {}
    if args.dump_to:
      os.makedirs(args.dump_to, exist_ok=True)
      overrides["xla_dump_to"] = args.dump_to
    with flags.override(**overrides):
      pipeline.run(module)  # verifies before the first pass and after each
    if args.memory_report:
      from xla.tools import memory_report  # pylint: disable=g-import-not-at-top
      rendered = memory_report.format_report(
          f"{path} (module {module.name}"
          + (f", pipeline {args.pipeline})" if args.pipeline else ")"),
          memory_report.report(module))
    else:
      rendered = _render(module, args.format, args.computation,
                         args.expand_fusions)
      if before is not None:
        done = ",".join(p.name for p in pipeline.passes) or "no passes"
        rendered = (f"// before: {path}\n{before}\n"
                    f"// after: {done}\n{rendered}")
  except support.XlaError as e:
    message = str(e)
    if not message.startswith(path):
      message = f"{path}: error: {message}"
    return fail(_INPUT_ERROR, message)
  except RecursionError:
    return fail(_INPUT_ERROR, f"{path}: error: input nested too deeply")
  except OSError as e:
    return fail(_INPUT_ERROR, f"error: {e}")
  except Exception as e:  # pylint: disable=broad-except
    # A bug in a pass or the importer, not in the input: one line, no trace.
    if os.environ.get("HLO_OPT_TRACEBACK"):
      raise
    return fail(_INTERNAL_ERROR, f"{path}: internal error: "
                f"{type(e).__name__}: {e} (rerun with "
                f"HLO_OPT_TRACEBACK=1 for the traceback)")

  try:
    if args.output:
      with open(args.output, "w", encoding="utf-8") as f:
        f.write(rendered)
    else:
      stdout.write(rendered)
      stdout.flush()
  except BrokenPipeError:
    return 0
  except OSError as e:
    return fail(_INPUT_ERROR, f"error: cannot write {args.output}: "
                f"{e.strerror}")
  if args.dump_to and not args.memory_report:
    _dump_graph(args.dump_to, module, args.format, rendered)
  return 0


def _dump_graph(directory: str, module, fmt: str, rendered: str) -> None:
  """With --dump-to and a graph format, also leave the final picture there."""
  if fmt == "text":
    return
  from xla.hlo.pass_ import hlo_pass_pipeline  # pylint: disable=g-import-not-at-top
  name = hlo_pass_pipeline.dump_file_name(module.name, 9999, "final")
  path = os.path.join(directory, name[:-len(".txt")] + "." + fmt)
  with open(path, "w", encoding="utf-8") as f:
    f.write(rendered)

if __name__ == "__main__":
  sys.exit(main())
