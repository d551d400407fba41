"""`hlo-opt`: parse an HLO module, run passes, verify, print or draw it.

  python -m xla.tools.hlo_opt FILE [--passes=dce,cse,algsimp,...]
      [--pipeline=default] [--dump-to=DIR] [--format=text|dot|html]
      [--computation=NAME] [--no-expand-fusions] [-o OUT] [--list-passes]
      [--memory-report]

With --memory-report the output is, instead of the module, its buffer
assignment summary after the passes (xla/tools/memory_report.py): bytes with
buffer reuse, without, their ratio and the peak of live bytes.

FILE is HLO text (`.hlo`, `.txt`, anything else), a binary HloModuleProto
(`.pb`), or StableHLO MLIR (`.mlir`)
when the StableHLO -> HLO importer (xla/translate/stablehlo_to_hlo.py) is
present. '-' reads HLO text from stdin.

Passes are found through `PASSES`, a table of short name -> where the pass
class lives; modules are imported only when a pass is used, so a pass whose
module does not exist (yet) is reported as "not available" instead of
breaking the tool. `--passes` runs the named passes in order (after
`--pipeline`'s, if both are given) inside one HloPassPipeline, which runs the
verifier before the first and after every pass.

Exit status: 0 success; 1 bad input (unreadable file, parse or verifier
error, a pass rejected the module); 2 bad usage (unknown or unavailable
pass, bad flag); 3 an internal error (a bug in a pass or the importer).
Errors go to stderr as `FILE:LINE:COL: error: ...` where a position is
known; bad input never prints a Python traceback.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Any, Optional

import support
from support import flags

_USAGE_ERROR = 2
_INPUT_ERROR = 1
_INTERNAL_ERROR = 3


@dataclasses.dataclass(frozen=True)
class PassEntry:
  """Where a pass lives: candidate (module, class) pairs, tried in order."""
  candidates: tuple[tuple[str, str], ...]
  help: str
  kwargs: tuple[tuple[str, Any], ...] = ()
  fixed_point: bool = False  # wrap in HloPassFix


_SIMPLIFIERS = "xla.hlo.transforms.simplifiers"

# Short name -> pass. Extend by adding a row; nothing is imported until used.
PASSES: dict[str, PassEntry] = {
    "dce": PassEntry(((f"{_SIMPLIFIERS}.hlo_dce", "HloDCE"),),
                     "dead code elimination"),
    "cse": PassEntry(((f"{_SIMPLIFIERS}.hlo_cse", "HloCSE"),),
                     "common subexpression elimination"),
    "algsimp": PassEntry(
        ((f"{_SIMPLIFIERS}.algebraic_simplifier", "AlgebraicSimplifier"),),
        "algebraic simplifier (to a fixed point)", fixed_point=True),
    "constant-folding": PassEntry(
        ((f"{_SIMPLIFIERS}.hlo_constant_folding", "HloConstantFolding"),),
        "evaluate instructions whose operands are constants"),
    "reshape-mover": PassEntry(
        ((f"{_SIMPLIFIERS}.reshape_mover", "ReshapeMover"),),
        "move reshapes/transposes across elementwise ops"),
    "transpose-folding": PassEntry(
        ((f"{_SIMPLIFIERS}.transpose_folding", "TransposeFolding"),),
        "fold transposes into dot dimension numbers"),
    "while-loop-simplifier": PassEntry(
        ((f"{_SIMPLIFIERS}.while_loop_simplifier", "WhileLoopSimplifier"),),
        "remove dead while-loop state, trip-count-0/1 loops"),
    "licm": PassEntry(
        ((f"{_SIMPLIFIERS}.while_loop_invariant_code_motion",
          "WhileLoopInvariantCodeMotion"),),
        "hoist loop-invariant instructions out of while bodies"),
    "fusion": PassEntry(
        (("xla.service.cpu_instruction_fusion", "CpuInstructionFusion"),),
        "CPU loop / input fusion into kFusion instructions"),
    "multi-output-fusion": PassEntry(
        (("xla.service.multi_output_fusion", "MultiOutputFusion"),),
        "merge sibling / producer-consumer fusions into multi-output ones"),
    "layout-assignment": PassEntry(
        ((f"{_SIMPLIFIERS}.layout_assignment", "LayoutAssignment"),),
        "assign layouts to every instruction"),
}

# --pipeline=NAME -> pass names. Unavailable passes are skipped (and named on
# stderr).
PIPELINES: dict[str, tuple[str, ...]] = {
    # Simplify first so fusion sees fewer, canonical instructions; DCE last
    # drops what fusion left behind.
    "default": ("dce", "cse", "algsimp", "constant-folding",
                "while-loop-simplifier", "licm", "reshape-mover",
                "transpose-folding", "algsimp", "dce", "fusion",
                "multi-output-fusion", "dce"),
    "simplify": ("dce", "cse", "algsimp", "dce"),
}


class PassNotAvailable(support.NotFoundError):
  """A pass named in PASSES whose module or class cannot be imported."""


def load_pass(name: str):
  """A new pass object for `name`; raises NotFoundError (unknown) or
  PassNotAvailable (known, but its module is missing)."""
  entry = PASSES.get(name)
  if entry is None:
    raise support.NotFoundError(
        f"unknown pass '{name}'; known passes: {', '.join(sorted(PASSES))}")
  reasons = []
  for module_name, class_name in entry.candidates:
    try:
      module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
      reasons.append(f"{module_name} not found ({e.name})")
      continue
    cls = getattr(module, class_name, None)
    if cls is None:
      reasons.append(f"{module_name} has no {class_name}")
      continue
    try:
      pass_ = cls(**dict(entry.kwargs))
    except TypeError as e:
      reasons.append(f"{module_name}.{class_name} cannot be built with "
                     f"default arguments: {e}")
      continue
    if entry.fixed_point:
      from xla.hlo.pass_ import hlo_pass_fix  # pylint: disable=g-import-not-at-top
      pass_ = hlo_pass_fix.HloPassFix(pass_)
    return pass_
  raise PassNotAvailable(f"pass '{name}' is not available: "
                         + "; ".join(reasons))


def pass_available(name: str) -> Optional[str]:
  """None when `name` loads, else the reason it does not."""
  try:
    load_pass(name)
  except support.NotFoundError as e:
    return str(e)
  return None


def read_module(path: str, text: str):
  """Parses HLO text, StableHLO MLIR for a `.mlir` path, or a binary
  HloModuleProto for a `.pb` path (then `text` is bytes), unverified."""
  if path.endswith(".pb"):
    from xla.hlo.proto import hlo_proto  # pylint: disable=g-import-not-at-top
    return hlo_proto.hlo_module_from_proto(text)
  if path.endswith(".mlir"):
    try:
      from xla.translate import stablehlo_to_hlo  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise support.UnimplementedError(
          f"{path}: StableHLO input needs xla/translate/stablehlo_to_hlo.py, "
          f"which is not available ({e}); give HLO text instead") from None
    from stablehlo._src import text as mlir_text  # pylint: disable=g-import-not-at-top
    from stablehlo._src.ops import verify  # pylint: disable=g-import-not-at-top
    smodule = mlir_text.parse_module(text, path)
    verify.verify_module(smodule)
    try:
      # CHLO and quantized types are legalized first (StableHLO passes).
      return stablehlo_to_hlo.legalize_and_import(smodule)
    except ImportError as e:  # the importer is incomplete
      raise support.UnimplementedError(
          f"{path}: the StableHLO importer is not usable: {e}") from None
  from xla.hlo.parser import hlo_parser  # pylint: disable=g-import-not-at-top
  try:
    return hlo_parser.parse_and_return_unverified_module(text)
  except hlo_parser.HloParseUnimplementedError as e:
    # The parser's messages start with "LINE:COL: error:".
    raise support.UnimplementedError(f"{path}:{e}") from None
  except hlo_parser.HloParseError as e:
    raise support.InvalidArgumentError(f"{path}:{e}") from None


def _build_pipeline(pass_names: list[str], name: str):
  from xla.hlo.pass_ import hlo_pass_pipeline  # pylint: disable=g-import-not-at-top
  pipeline = hlo_pass_pipeline.HloPassPipeline(name)
  for pass_name in pass_names:
    pipeline.add_pass(load_pass(pass_name))
  return pipeline


def build_named_pipeline(name: str, skipped: Optional[list] = None):
  """An HloPassPipeline of PIPELINES[name]; passes that are not available
  are left out (their reasons appended to `skipped` when given)."""
  names = []
  for pass_name in PIPELINES[name]:
    reason = pass_available(pass_name)
    if reason is None:
      names.append(pass_name)
    elif skipped is not None:
      skipped.append(reason)
  return _build_pipeline(names, name)


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
  # argparse is imported here, not at the top: the CPU compiler imports this
  # module for its pass table on every first compile.
  import argparse  # pylint: disable=g-import-not-at-top
  ap = argparse.ArgumentParser(
      prog="python -m xla.tools.hlo_opt",
      description="Run HLO passes over a module, verify it, and print it as "
      "HLO text, Graphviz DOT or a self-contained HTML/SVG page.",
      epilog="passes: " + ", ".join(sorted(PASSES)) + "; pipelines: "
      + ", ".join(sorted(PIPELINES)) + ". See --list-passes.")
  ap.add_argument("file", metavar="FILE", nargs="?",
                  help="HLO text, or StableHLO .mlir; '-' reads stdin")
  ap.add_argument("--passes", default="",
                  help="comma-separated pass names, run in order")
  ap.add_argument("--pipeline", choices=sorted(PIPELINES),
                  help="a named pass list, run before --passes (passes not "
                  "available yet are skipped)")
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

  # Assemble the pass list before reading input: usage errors come first.
  pass_names: list[str] = []
  if args.pipeline:
    for name in PIPELINES[args.pipeline]:
      reason = pass_available(name)
      if reason is None:
        pass_names.append(name)
      else:
        stderr.write(f"note: pipeline '{args.pipeline}': skipping {reason}\n")
  pass_names.extend(_split_names(args.passes))
  try:
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
