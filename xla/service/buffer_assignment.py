"""Buffer assignment: liveness, in-place updates and reuse (modelled on XLA's
xla/service/buffer_assignment.h, hlo_live_range.h and heap_simulator.h).

1. Timeline. The per-computation schedule is flattened into one sequence:
   each instruction gets a time; a while / conditional / call is preceded by
   the flattened sequences of the computations it runs (XLA's
   HloLiveRange::FlattenSchedule). Fusion bodies and appliers are not
   flattened; they allocate nothing.
2. Liveness. A value lives from its defining instruction's time to the last
   time it is read; a value reaching the entry root lives to the end. A
   buffer (values that must alias, from hlo_dataflow_analysis) lives over
   the union of its values' ranges.
3. In-place updates. dynamic-update-slice and scatter write into operand 0
   (scatter: operand i for result i), a while loop writes its carry into the
   init operand, when that operand's buffer dies at the instruction, is not
   read by another operand of it, has the same size, and holds no entry
   parameter, constant or output. A *read-only* carry element (the body
   passes its parameter element through: the carry's buffer holds no value
   defined in the body) is never written, so it simply shares the init
   operand's storage whatever that is (entry parameter, constant or a
   temporary still live after the loop) instead of getting a copy - XLA's
   dataflow analysis does the same by not defining a new value for it.
4. Allocations. Entry parameters, constants and the output each get their
   own allocation and are never shared; all other buffers ("temporaries")
   go into one heap allocation laid out by a best-fit heap simulator, so
   buffers with disjoint live ranges reuse the same bytes.

`peak_memory_report(module)` summarises peak and total allocation size with
reuse against the size without reuse (every buffer its own allocation).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import support
from xla import shape_util
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_module import HloModule
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service import hlo_dataflow_analysis as dfa
from xla.service import hlo_memory_scheduler
from xla.service import hlo_schedule as hs

PARAMETER = "parameter"
CONSTANT = "constant"
OUTPUT = "output"
TEMP = "temp"


# -- heap simulator -------------------------------------------------------------


class BestFitHeap:
  """Offsets in one growing heap: an allocation takes the smallest free
  hole that fits, else extends the top (merging with a free hole that ends
  at the top). Freed holes coalesce with their neighbours."""

  def __init__(self, alignment: int = 1):
    self.alignment = max(1, alignment)
    self.free: list[tuple[int, int]] = []  # (offset, size), by offset
    self.top = 0
    self.peak = 0

  def _round(self, size: int) -> int:
    a = self.alignment
    return (size + a - 1) // a * a

  def alloc(self, size: int) -> int:
    size = self._round(size)
    best = None
    for i, (off, sz) in enumerate(self.free):
      if sz >= size and (best is None or sz < self.free[best][1]):
        best = i
    if best is not None:
      off, sz = self.free.pop(best)
      if sz > size:
        self.free.insert(best, (off + size, sz - size))
      return off
    if self.free and sum(self.free[-1]) == self.top:
      off, _ = self.free.pop()
    else:
      off = self.top
    self.top = off + size
    self.peak = max(self.peak, self.top)
    return off

  def release(self, offset: int, size: int) -> None:
    size = self._round(size)
    self.free.append((offset, size))
    self.free.sort()
    merged: list[tuple[int, int]] = []
    for off, sz in self.free:
      if merged and sum(merged[-1]) == off:
        merged[-1] = (merged[-1][0], merged[-1][1] + sz)
      else:
        merged.append((off, sz))
    if merged and sum(merged[-1]) == self.top:
      self.top = merged.pop()[0]
    self.free = merged


# -- assignment -----------------------------------------------------------------


@dataclasses.dataclass
class LogicalBuffer:
  """A must-alias buffer, or several merged by in-place updates."""
  buffers: list[dfa.HloBuffer]
  size: int
  start: int
  end: int
  kind: str = TEMP
  allocation: int = -1
  offset: int = 0


@dataclasses.dataclass
class Allocation:
  index: int
  kind: str
  size: int
  members: list[LogicalBuffer]


class BufferAssignment:
  """The result of `assign_buffers`; see the module docstring."""

  def __init__(self, module: HloModule, analysis: dfa.HloDataflowAnalysis,
               schedule: hs.HloSchedule, alignment: int = 1):
    self.module = module
    self.analysis = analysis
    self.schedule = schedule
    self.alignment = alignment
    self.time: dict[int, int] = {}
    self.sequence: list[HloInstruction] = []
    self.in_place: list[tuple[HloInstruction, dfa.ShapeIndex]] = []
    self.allocations: list[Allocation] = []
    self._group: dict[int, LogicalBuffer] = {}  # HloBuffer id -> group
    self.heap_size = 0

  def run(self) -> "BufferAssignment":
    """Fills in the assignment: the flattened timeline, live ranges,
    in-place reuse, then the allocations. Returns self."""
    self._flatten(self.module.entry_computation)
    self._live_ranges()
    for instr in self.sequence:
      self._try_in_place(instr)
    self._allocate()
    return self

  # -- timeline and liveness ----------------------------------------------------

  def _flatten(self, comp) -> None:
    for instr in self.schedule.sequence(comp):
      for callee in dfa.control_flow_callees(instr):
        self._flatten(callee)
      self.time[id(instr)] = len(self.sequence)
      self.sequence.append(instr)

  def _live_ranges(self) -> None:
    last = len(self.sequence) - 1
    for buf in self.analysis.buffers:
      start, end = last, 0
      for v in buf.values:
        t = self.time[id(v.defining_instruction)]
        start = min(start, t)
        end = max(end, t)
        for user in self.analysis.uses(v):
          end = max(end, self.time[id(user)])
        if self.analysis.is_live_out(v):
          end = last
      group = LogicalBuffer([buf], buf.size, start, end)
      for v in buf.values:
        if self.analysis.entry_parameter_value(v) is not None:
          group.kind = PARAMETER
          group.start, group.end = 0, last
      if group.kind == TEMP:
        if any(v.defining_instruction.opcode == HloOpcode.kConstant
               for v in buf.values):
          group.kind = CONSTANT
          group.start, group.end = 0, last
        elif any(self.analysis.is_live_out(v) for v in buf.values):
          group.kind = OUTPUT
      self._group[buf.id] = group

  def group_at(self, instr: HloInstruction,
               index: dfa.ShapeIndex = ()) -> LogicalBuffer:
    return self._group[self.analysis.buffer_at(instr, index).id]

  # -- in-place updates ---------------------------------------------------------

  def _in_place_candidates(self, instr: HloInstruction):
    op = instr.opcode
    if op == HloOpcode.kDynamicUpdateSlice:
      yield (), instr.operand(0), ()
    elif op == HloOpcode.kScatter:
      n = (instr.operand_count - 1) // 2
      for i in range(n):
        yield ((i,) if n > 1 else ()), instr.operand(i), ()
    elif op == HloOpcode.kWhile:
      init = instr.operand(0)
      for index, _ in _subshapes(init.shape):
        yield index, init, index

  def _read_only_carry(self, w: HloInstruction, group: LogicalBuffer) -> bool:
    """Whether `group` is a carry element of while `w` that nothing writes:
    its values are only w's own and its body / condition parameters'."""
    comps = (w.while_body, w.while_condition)
    return all(v.defining_instruction is w or (
        v.defining_instruction.opcode == HloOpcode.kParameter and
        v.defining_instruction.parent in comps)
               for b in group.buffers for v in b.values)

  def _share_read_only(self, instr, out, src) -> bool:
    if out is src or out.kind != TEMP or src.size != out.size:
      return False
    if src.kind not in (TEMP, PARAMETER, CONSTANT):
      return False
    if not self._read_only_carry(instr, out):
      return False
    merged = LogicalBuffer(src.buffers + out.buffers, out.size,
                           min(src.start, out.start), max(src.end, out.end),
                           src.kind)
    for b in merged.buffers:
      self._group[b.id] = merged
    return True

  def _try_in_place(self, instr: HloInstruction) -> None:
    t = self.time[id(instr)]
    for out_index, operand, op_index in self._in_place_candidates(instr):
      out = self.group_at(instr, out_index)
      src = self.group_at(operand, op_index)
      if instr.opcode == HloOpcode.kWhile and out_index and (
          self._share_read_only(instr, out, src)):
        continue
      if out is src or src.kind != TEMP or out.kind == PARAMETER:
        continue
      if out.kind == CONSTANT or src.end != t or src.size != out.size:
        continue
      others = [self.group_at(o, i) for k, o in enumerate(instr.operands)
                if o is not operand for i, _ in _subshapes(o.shape)]
      if any(g is src for g in others):
        continue
      merged = LogicalBuffer(src.buffers + out.buffers, out.size,
                             min(src.start, out.start), max(src.end, out.end),
                             out.kind)
      for b in merged.buffers:
        self._group[b.id] = merged
      self.in_place.append((instr, out_index))

  # -- allocation -----------------------------------------------------------------

  def groups(self) -> list[LogicalBuffer]:
    seen: dict[int, LogicalBuffer] = {}
    for g in self._group.values():
      seen.setdefault(id(g), g)
    return sorted(seen.values(), key=lambda g: min(b.id for b in g.buffers))

  def _allocate(self) -> None:
    temps = []
    for g in self.groups():
      if g.size == 0:
        continue
      if g.kind == TEMP:
        temps.append(g)
        continue
      g.allocation = len(self.allocations)
      self.allocations.append(Allocation(g.allocation, g.kind, g.size, [g]))
    heap = BestFitHeap(self.alignment)
    events = []
    for i, g in enumerate(temps):
      events.append((g.start, 0, -g.size, i))  # allocations first at a time
      events.append((g.end, 1, 0, i))
    for _, kind, _, i in sorted(events):
      g = temps[i]
      if kind == 0:
        g.offset = heap.alloc(g.size)
      else:
        heap.release(g.offset, g.size)
    self.heap_size = heap.peak
    if temps:
      index = len(self.allocations)
      for g in temps:
        g.allocation = index
      self.allocations.append(Allocation(index, TEMP, heap.peak, temps))

  # -- queries ------------------------------------------------------------------

  def shares_storage(self, a: HloInstruction, a_index: dfa.ShapeIndex,
                     b: HloInstruction, b_index: dfa.ShapeIndex) -> bool:
    """Whether the two positions' bytes overlap (same or reused storage)."""
    ga, gb = self.group_at(a, a_index), self.group_at(b, b_index)
    if ga is gb:
      return True
    if ga.allocation != gb.allocation or ga.allocation < 0:
      return False
    return (ga.offset < gb.offset + gb.size and
            gb.offset < ga.offset + ga.size)

  def total_allocation_bytes(self) -> int:
    return sum(a.size for a in self.allocations)

  def no_reuse_bytes(self) -> int:
    """Every must-alias buffer in its own allocation, no in-place updates."""
    return sum(b.size for b in self.analysis.buffers)

  def peak_live_bytes(self) -> int:
    """Max over time of the bytes live at once (a lower bound for any
    layout; parameters and constants count for the whole program)."""
    delta = [0] * (len(self.sequence) + 1)
    for g in self.groups():
      delta[g.start] += g.size
      delta[g.end + 1] -= g.size
    live = peak = 0
    for d in delta:
      live += d
      peak = max(peak, live)
    return peak

  def bytes_of_kind(self, kind: str) -> int:
    return sum(a.size for a in self.allocations if a.kind == kind)

  def to_string(self) -> str:
    lines = []
    for a in self.allocations:
      lines.append(f"allocation {a.index} ({a.kind}) size={a.size}")
      for g in a.members:
        names = ", ".join(str(v.defining_position)
                          for b in g.buffers for v in b.values)
        lines.append(f"  [{g.start},{g.end}] offset={g.offset} "
                     f"size={g.size}: {names}")
    return "\n".join(lines)


def _subshapes(shape):
  return shape_util.subshapes(shape)


def assign_buffers(module: HloModule,
                   schedule: Optional[hs.HloSchedule] = None,
                   analysis: Optional[dfa.HloDataflowAnalysis] = None,
                   alignment: int = 1) -> BufferAssignment:
  """Assigns buffers of `module` under `schedule` (default: the memory
  scheduler's choice)."""
  analysis = analysis or dfa.HloDataflowAnalysis.run(module)
  if schedule is None:
    schedule, _ = hlo_memory_scheduler.schedule_module(
        module, analysis=analysis)
  for comp in analysis.computations:
    if not schedule.is_computation_scheduled(comp):
      raise support.FailedPreconditionError(
          f"computation {comp.name} has no schedule")
  return BufferAssignment(module, analysis, schedule, alignment).run()


def peak_memory_report(module: HloModule, use_module_order: bool = False,
                       alignment: int = 1) -> dict:
  """Bytes needed with buffer reuse vs without, for `module`.

  Schedules with the memory scheduler, or keeps the text order when
  `use_module_order` (e.g. modules printed with is_scheduled=true). Keys:
  total_with_reuse (all allocations: parameters, constants, output, temp
  heap), total_without_reuse (every buffer its own allocation),
  peak_live_bytes, temp_heap_bytes, temp_without_reuse, parameter_bytes,
  constant_bytes, output_bytes, in_place_updates, ratio
  (total_with_reuse / total_without_reuse), scheduler (peaks per algorithm
  of the entry, when scheduled here).
  """
  analysis = dfa.HloDataflowAnalysis.run(module)
  report = None
  if use_module_order:
    schedule = hs.schedule_from_text_order(module, analysis.computations)
  else:
    schedule, report = hlo_memory_scheduler.schedule_module(
        module, analysis=analysis)
  ba = assign_buffers(module, schedule, analysis, alignment)
  with_reuse = ba.total_allocation_bytes()
  without = ba.no_reuse_bytes()
  temp_without = sum(
      b.size for b in analysis.buffers
      if ba.group_at(b.values[0].defining_instruction,
                     b.values[0].defining_index).kind == TEMP)
  result = {
      "total_with_reuse": with_reuse,
      "total_without_reuse": without,
      "peak_live_bytes": ba.peak_live_bytes(),
      "temp_heap_bytes": ba.heap_size,
      "temp_without_reuse": temp_without,
      "parameter_bytes": ba.bytes_of_kind(PARAMETER),
      "constant_bytes": ba.bytes_of_kind(CONSTANT),
      "output_bytes": ba.bytes_of_kind(OUTPUT),
      "in_place_updates": len(ba.in_place),
      "ratio": with_reuse / without if without else 1.0,
  }
  if report is not None:
    result["scheduler"] = report.computations[report.entry].peaks
  return result
