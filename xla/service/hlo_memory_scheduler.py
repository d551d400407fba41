"""Memory-minimising instruction schedulers (modelled on XLA's
xla/service/hlo_memory_scheduler.h: list, DFS and post-order schedulers and
a default that keeps whichever gives the lowest peak).

Memory model of one computation under a sequence: running an instruction
allocates the values it defines (forwarding ops such as get-tuple-element
define none) and, while it runs, whatever its called control-flow
computations need at their own peak; afterwards every value whose readers
have all run is freed. Parameters are not counted (no order changes them);
values reaching the computation's root stay live to the end.

* post-order: `HloComputation.make_instruction_post_order()`.
* DFS: a post-order that visits the operand with the larger cumulative
  subtree size first, so big temporaries are gone before small results wait.
* list: greedy; among ready instructions pick the one with the largest
  (bytes freed - bytes defined), ties in post-order.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import support
from xla import shape_util
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_module import HloModule
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service import hlo_dataflow_analysis as dfa
from xla.service.hlo_schedule import HloSchedule

POST_ORDER = "post_order"
DFS = "dfs"
LIST = "list"
DEFAULT = "default"


class _CompModel:
  """Per-computation sizes, readers and callee peaks."""

  def __init__(self, comp: HloComputation, analysis: dfa.HloDataflowAnalysis,
               callee_peak: dict[int, int]):
    self.comp = comp
    self.defined: dict[int, list[dfa.HloValue]] = {}
    self.reads: dict[int, list[dfa.HloValue]] = {}
    self.readers: dict[int, set[int]] = {}  # value id -> reader instr ids
    self.pinned: set[int] = set()  # values live to the end
    self.extra: dict[int, int] = {}
    for instr in comp.instructions:
      if instr.opcode == HloOpcode.kParameter:
        self.defined[id(instr)] = []
      else:
        self.defined[id(instr)] = analysis.values_defined_by(instr)
      callees = dfa.control_flow_callees(instr)
      peaks = [callee_peak.get(id(c), 0) for c in callees]
      if instr.opcode == HloOpcode.kConditional:
        self.extra[id(instr)] = max(peaks, default=0)
      else:
        self.extra[id(instr)] = sum(peaks)
    for instr in comp.instructions:
      for value in self.defined[id(instr)]:
        users = [u for u in analysis.uses(value) if u.parent is comp]
        self.readers[value.id] = {id(u) for u in users}
        if any(p.instruction is comp.root_instruction
               for p in value.positions):
          self.pinned.add(value.id)
    for instr in comp.instructions:
      seen = {}
      if instr.opcode not in dfa.FORWARDING_OPCODES:
        for operand in instr.operands:
          for index, _ in _indices(operand):
            v = analysis.value_at(operand, index)
            if v.id in self.readers and id(instr) in self.readers[v.id]:
              seen[v.id] = v
      self.reads[id(instr)] = list(seen.values())

  def defined_bytes(self, instr: HloInstruction) -> int:
    return sum(v.size for v in self.defined[id(instr)])

  def peak(self, sequence: list[HloInstruction]) -> int:
    remaining = {k: set(v) for k, v in self.readers.items()}
    live = peak = 0
    for instr in sequence:
      live += self.defined_bytes(instr)
      peak = max(peak, live + self.extra[id(instr)])
      for v in self.reads[id(instr)]:
        remaining[v.id].discard(id(instr))
        if not remaining[v.id] and v.id not in self.pinned:
          live -= v.size
      for v in self.defined[id(instr)]:
        if not remaining[v.id] and v.id not in self.pinned:
          live -= v.size  # dead on arrival
    return peak


def _indices(instr: HloInstruction):
  return shape_util.subshapes(instr.shape)


def _deps(instr: HloInstruction) -> list[HloInstruction]:
  return list(instr.operands) + list(instr.control_predecessors)


def post_order_sequence(model: _CompModel) -> list[HloInstruction]:
  return model.comp.make_instruction_post_order()


def dfs_sequence(model: _CompModel) -> list[HloInstruction]:
  comp = model.comp
  post = comp.make_instruction_post_order()
  cumulative: dict[int, int] = {}
  for instr in post:  # operands first; shared subtrees count once per path
    cumulative[id(instr)] = model.defined_bytes(instr) + sum(
        cumulative[id(d)] for d in set(_deps(instr)))
  rank = {id(x): i for i, x in enumerate(post)}
  order: list[HloInstruction] = []
  done: set[int] = set()
  roots = [x for x in post if not x.users]
  roots.sort(key=lambda x: (x is not comp.root_instruction, rank[id(x)]))
  for start in roots:
    stack = [(start, False)]
    while stack:
      instr, expanded = stack.pop()
      if id(instr) in done:
        continue
      if expanded:
        done.add(id(instr))
        order.append(instr)
        continue
      stack.append((instr, True))
      deps = [d for d in _deps(instr) if id(d) not in done]
      # Largest subtree first: pushed last so it is popped first.
      deps.sort(key=lambda d: (cumulative[id(d)], -rank[id(d)]))
      for d in deps:
        stack.append((d, False))
  return order


def list_sequence(model: _CompModel) -> list[HloInstruction]:
  comp = model.comp
  post = comp.make_instruction_post_order()
  rank = {id(x): i for i, x in enumerate(post)}
  waiting = {id(x): len(set(map(id, _deps(x)))) for x in post}
  dependents: dict[int, list[HloInstruction]] = {id(x): [] for x in post}
  for x in post:
    for d in {id(d): d for d in _deps(x)}.values():
      dependents[id(d)].append(x)
  remaining = {k: set(v) for k, v in model.readers.items()}
  ready = [x for x in post if waiting[id(x)] == 0]
  order: list[HloInstruction] = []

  def priority(instr):
    freed = sum(v.size for v in model.reads[id(instr)]
                if remaining[v.id] == {id(instr)} and v.id not in model.pinned)
    return (freed - model.defined_bytes(instr), -rank[id(instr)])

  while ready:
    best = max(ready, key=priority)
    ready.remove(best)
    order.append(best)
    for v in model.reads[id(best)]:
      remaining[v.id].discard(id(best))
    for user in dependents[id(best)]:
      waiting[id(user)] -= 1
      if waiting[id(user)] == 0:
        ready.append(user)
  return order


_ALGORITHMS: dict[str, Callable[[_CompModel], list[HloInstruction]]] = {
    LIST: list_sequence,
    DFS: dfs_sequence,
    POST_ORDER: post_order_sequence,
}


@dataclasses.dataclass
class ComputationScheduleReport:
  peaks: dict[str, int]  # algorithm -> peak bytes of its sequence
  chosen: str

  @property
  def chosen_peak(self) -> int:
    return self.peaks[self.chosen]


@dataclasses.dataclass
class MemorySchedulerReport:
  """Peaks (bytes, parameters excluded) per computation and algorithm."""
  computations: dict[str, ComputationScheduleReport]
  entry: str

  @property
  def peak(self) -> int:
    return self.computations[self.entry].chosen_peak

  @property
  def post_order_peak(self) -> int:
    return self.computations[self.entry].peaks[POST_ORDER]


def schedule_module(module: HloModule, algorithm: str = DEFAULT,
                    analysis: Optional[dfa.HloDataflowAnalysis] = None
                    ) -> tuple[HloSchedule, MemorySchedulerReport]:
  """Schedules every control-flow computation of `module`; `algorithm` is
  one of list / dfs / post_order, or default (the lowest peak of the three,
  preferring them in that order on ties)."""
  if algorithm != DEFAULT and algorithm not in _ALGORITHMS:
    raise support.InvalidArgumentError(
        f"unknown scheduling algorithm {algorithm!r}; expected one of "
        f"{sorted(_ALGORITHMS) + [DEFAULT]}")
  analysis = analysis or dfa.HloDataflowAnalysis.run(module)
  schedule = HloSchedule(module)
  reports: dict[str, ComputationScheduleReport] = {}
  callee_peak: dict[int, int] = {}
  # Callees before callers, so a caller sees its callees' peaks.
  for comp in reversed(analysis.computations):
    model = _CompModel(comp, analysis, callee_peak)
    names = list(_ALGORITHMS) if algorithm == DEFAULT else [algorithm]
    if POST_ORDER not in names:
      names.append(POST_ORDER)  # always reported as the baseline
    sequences = {n: _ALGORITHMS[n](model) for n in names}
    peaks = {n: model.peak(s) for n, s in sequences.items()}
    if algorithm == DEFAULT:
      chosen = min(_ALGORITHMS, key=lambda n: (peaks[n], list(
          _ALGORITHMS).index(n)))
    else:
      chosen = algorithm
    schedule.set_sequence(comp, sequences[chosen])
    callee_peak[id(comp)] = peaks[chosen]
    reports[comp.name] = ComputationScheduleReport(peaks, chosen)
  schedule.verify()
  return schedule, MemorySchedulerReport(
      reports, module.entry_computation.name)


def sequence_peak(module: HloModule, computation: HloComputation,
                  sequence: list[HloInstruction],
                  analysis: Optional[dfa.HloDataflowAnalysis] = None) -> int:
  """Peak bytes of `computation` run in `sequence` (callees not counted)."""
  analysis = analysis or dfa.HloDataflowAnalysis.run(module)
  return _CompModel(computation, analysis, {}).peak(sequence)
