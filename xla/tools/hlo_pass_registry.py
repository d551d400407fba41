"""The passes and pipelines that hlo_opt, hlo_conformance and memory_report
run by name: a table of short name -> where the pass class lives. Modules are
imported only when a pass is used, so a pass whose module does not exist
(yet) is reported as "not available" instead of breaking the tools.

The CPU compiler's own pipeline is not listed here: it is written out in
`xla.service.cpu.cpu_compiler.cpu_pipeline`, and `build_named_pipeline("cpu")`
returns it.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Optional

import support

# The name under which the CPU compiler's pipeline is offered.
CPU_PIPELINE = "cpu"


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
    "sharding-propagation": PassEntry(
        (("xla.service.spmd.sharding_propagation", "ShardingPropagation"),),
        "give every instruction a sharding (num_partitions: the module's)"),
    "spmd-partitioning": PassEntry(
        (("xla.service.cpu.spmd_pipeline", "SpmdPartitioning"),),
        "a global program with shardings -> one partition's program with "
        "collectives, as the CPU compiler partitions (sharding propagation, "
        "then the SPMD partitioner; num_partitions: the module's)"),
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


def build_pipeline(pass_names: list[str], name: str):
  from xla.hlo.pass_ import hlo_pass_pipeline  # pylint: disable=g-import-not-at-top
  pipeline = hlo_pass_pipeline.HloPassPipeline(name)
  for pass_name in pass_names:
    pipeline.add_pass(load_pass(pass_name))
  return pipeline


def pipeline_names() -> list[str]:
  return sorted(list(PIPELINES) + [CPU_PIPELINE])


def cpu_pass_names() -> list[str]:
  """The pass names of the CPU compiler's pipeline, in order."""
  return [p.name for p in build_named_pipeline(CPU_PIPELINE).passes]


def build_named_pipeline(name: str, skipped: Optional[list] = None):
  """An HloPassPipeline of PIPELINES[name], or the CPU compiler's own for
  CPU_PIPELINE; passes that are not available are left out (their reasons
  appended to `skipped` when given)."""
  if name == CPU_PIPELINE:
    from xla.service.cpu import cpu_compiler  # pylint: disable=g-import-not-at-top
    return cpu_compiler.cpu_pipeline()
  names = []
  for pass_name in PIPELINES[name]:
    reason = pass_available(pass_name)
    if reason is None:
      names.append(pass_name)
    elif skipped is not None:
      skipped.append(reason)
  return build_pipeline(names, name)
