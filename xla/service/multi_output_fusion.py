"""Multi-output fusion (modelled on xla/service/multi_output_fusion.h and the
CPU backend's use of it).

Runs after instruction fusion and joins two fusible instructions of one
computation into a single fusion whose root is a tuple, when that saves
memory traffic:

  sibling fusion: two consumers A and B of a common operand X (X is not a
    scalar) become one fusion that reads X once instead of twice. A and B
    must iterate over the same loop shape (their output shape, or the
    reduce input shape for a reduction) and neither may reach the other
    (else the merged fusion would be part of a cycle).

  producer-consumer fusion: a producer P fused into its consumer C although
    P also has other users: C computes P's value in the same loop and
    exports it as a second output, so C no longer reads P's buffer. P must
    be a loop (elementwise) producer, P and C must have the same loop shape
    and no other user of P may reach C.

Candidates are kLoop / kInput fusions with a non-tuple result, and plain
elementwise instructions and reduces (treated as single-instruction loop /
input fusions). Already multi-output fusions are not extended, which keeps
every merged fusion at two outputs. Instructions with side effects or
control dependencies are left alone, and a merged fusion is capped at
`max_instructions` fused instructions.
"""

from __future__ import annotations

from typing import Optional

from xla import shape_util
from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.service import instruction_fusion

O = HloOpcode


def _kind(instr: HloInstruction) -> Optional[FusionKind]:
  """kLoop / kInput for a candidate, None for anything else."""
  if instr.shape.is_tuple() or instr.control_predecessors or (
      instr.control_successors):
    return None
  if instr.opcode == O.kFusion:
    if instr.fusion_kind in (FusionKind.kLoop, FusionKind.kInput):
      return instr.fusion_kind
    return None
  if not instruction_fusion.is_fusible_at_all(instr):
    return None
  if instr.opcode == O.kReduce:
    return FusionKind.kInput
  if instr.is_elementwise():
    return FusionKind.kLoop
  return None


def loop_shape(instr: HloInstruction):
  """The iteration space: the reduce input shape for a reduction, else the
  result shape."""
  root = instr
  if instr.opcode == O.kFusion:
    root = instr.fused_computation.root_instruction
  if root.opcode == O.kReduce:
    return root.operand(0).shape
  return instr.shape


def _size(instr: HloInstruction) -> int:
  if instr.opcode == O.kFusion:
    return instr.fused_computation.instruction_count
  return 1


def reaches(a: HloInstruction, b: HloInstruction) -> bool:
  """True if there is a def-use path from `a` to `b` (a != b)."""
  seen: set[int] = set()
  stack = list(a.users) + list(a.control_successors)
  while stack:
    instr = stack.pop()
    if instr is b:
      return True
    if id(instr) in seen:
      continue
    seen.add(id(instr))
    stack.extend(instr.users)
    stack.extend(instr.control_successors)
  return False


class Reachability:
  """`reaches` for one computation while fusions change it, in constant
  time per query: each instruction has an index and an integer bit mask of
  the indices that reach it (its ancestors), built in post order. A fusion
  adds its fusion instruction and get-tuple-elements (`merged`) and ORs
  their ancestry into every instruction they reach, so masks stay exact
  for live instructions (bits of removed ones are never asked about)."""

  def __init__(self, comp):
    self._index: dict[int, int] = {}
    self._masks: list[int] = []
    self._keep: list[HloInstruction] = []  # No id is reused meanwhile.
    for instr in comp.make_instruction_post_order():
      self._add(instr)

  def _add(self, instr: HloInstruction) -> int:
    mask = 0
    for o in instr.operands:
      i = self._index[id(o)]
      mask |= self._masks[i] | (1 << i)
    for o in instr.control_predecessors:
      i = self._index[id(o)]
      mask |= self._masks[i] | (1 << i)
    index = len(self._masks)
    self._index[id(instr)] = index
    self._masks.append(mask)
    self._keep.append(instr)
    return index

  def reaches(self, a: HloInstruction, b: HloInstruction) -> bool:
    return bool((self._masks[self._index[id(b)]] >>
                 self._index[id(a)]) & 1)

  def merged(self, fusion: HloInstruction) -> None:
    """Adds `fusion` (just made by instruction_fusion.fuse_group) and the
    get-tuple-elements that read it."""
    new = [fusion] + [u for u in fusion.users
                      if u.opcode == O.kGetTupleElement]
    indices = [self._add(n) for n in new]
    fresh = {id(n) for n in new}
    for n, i in zip(new, indices):
      extra = self._masks[i] | (1 << i)
      seen: set[int] = set()
      stack = [u for u in list(n.users) + list(n.control_successors)
               if id(u) not in fresh]
      while stack:
        instr = stack.pop()
        if id(instr) in seen:
          continue
        seen.add(id(instr))
        j = self._index[id(instr)]
        self._masks[j] |= extra
        stack.extend(instr.users)
        stack.extend(instr.control_successors)


class MultiOutputFusion(hpi.HloModulePass):
  """See the module docstring."""

  def __init__(self, max_instructions: int = 128):
    self.max_instructions = max_instructions
    self._reach: Reachability | None = None  # Of the computation at hand.

  @property
  def name(self) -> str:
    return "multi_output_fusion"

  def _compatible(self, a: HloInstruction, b: HloInstruction) -> bool:
    return (_kind(a) is not None and _kind(b) is not None and
            shape_util.same_dimensions(loop_shape(a), loop_shape(b)) and
            _size(a) + _size(b) <= self.max_instructions)

  @staticmethod
  def _merged_kind(a: HloInstruction, b: HloInstruction) -> FusionKind:
    if FusionKind.kInput in (_kind(a), _kind(b)):
      return FusionKind.kInput
    return FusionKind.kLoop

  def _producer_consumer_sweep(self, comp) -> bool:
    """One pass over the computation, fusing every producer-consumer pair it
    finds; instructions a fusion replaced are skipped."""
    changed = False
    for producer in comp.make_instruction_post_order():
      # A reduction's result is smaller than its loop: a consumer that reads
      # it inside the same loop would recompute the whole reduction for each
      # of its elements (an n-body step ran 90x slower), so only loop
      # producers fuse into their consumers, as in XLA.
      if (producer.parent is not comp or producer.user_count < 2 or
          _kind(producer) != FusionKind.kLoop):
        continue
      for consumer in producer.users:
        if not self._compatible(producer, consumer):
          continue
        others = [u for u in producer.users if u is not consumer]
        if any(self._reach.reaches(u, consumer) for u in others):
          continue
        self._reach.merged(instruction_fusion.fuse_group(
            [producer, consumer], [consumer, producer],
            self._merged_kind(producer, consumer), name="fusion.multi"))
        changed = True
        break
    return changed

  def _sibling_sweep(self, comp) -> bool:
    """One pass over the computation, fusing sibling pairs; after a merge the
    operand's remaining users are looked at again."""
    changed = False
    for operand in comp.make_instruction_post_order():
      if (operand.parent is not comp or not operand.shape.is_array() or
          shape_util.element_count(operand.shape) <= 1):
        continue
      merged = True
      while merged:
        merged = False
        users = [u for u in operand.users if _kind(u) is not None]
        for i, a in enumerate(users):
          for b in users[i + 1:]:
            if not self._compatible(a, b):
              continue
            if self._reach.reaches(a, b) or self._reach.reaches(b, a):
              continue
            self._reach.merged(instruction_fusion.fuse_group(
                [a, b], [a, b], self._merged_kind(a, b), name="fusion.multi"))
            changed = merged = True
            break
          if merged:
            break
    return changed

  def run_on_computation(self, comp) -> bool:
    # Producer-consumer fusion first, to a fixed point, then siblings; a
    # sibling merge can enable another producer-consumer one, so repeat.
    # Each sweep goes on after a merge instead of starting over: restarting
    # made the pass quadratic in the number of merges (3 s of a GPT training
    # step's compile).
    changed = False
    self._reach = Reachability(comp)
    while True:
      merged = False
      while self._producer_consumer_sweep(comp):
        merged = True
      if self._sibling_sweep(comp):
        merged = True
      if not merged:
        return changed
      changed = True

  def run(self, module, execution_threads=frozenset()) -> bool:
    changed = False
    applied = instruction_fusion.applied_functions(module)
    for comp in hpi.computations_to_run(module, execution_threads):
      if comp.is_fusion_computation() or comp.parent is not module:
        continue
      if id(comp) in applied:
        continue
      changed |= self.run_on_computation(comp)
    return changed


def operand_reads(operand: HloInstruction) -> int:
  """How many instructions read `operand`'s buffer (one read each)."""
  return operand.user_count
