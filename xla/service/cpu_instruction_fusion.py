"""CPU instruction fusion (modelled on xla/service/cpu/cpu_instruction_fusion.cc).

Two kinds of fusion on top of `InstructionFusion`'s legality rules:

  loop fusion (kLoop): a producer that is elementwise or only moves/generates
    data (broadcast, reshape, transpose, slice, iota, constant, bitcast,
    reverse, pad, concatenate) is fused into an elementwise or data-movement
    consumer, or into an existing loop fusion. The fused loop computes each
    output element once, reading producer values on the fly.

  reduction input fusion (kInput): a producer as above is fused into a
    `reduce` consumer's input operands (not its init values), or into an
    existing kInput fusion, so the reduction reads the inputs directly
    instead of a materialised intermediate.

Dots and convolutions are never fused (the CPU backend calls a library
kernel for them); neither are reduces as producers, sorts, gathers,
scatters, reduce-windows or anything else outside the sets above.

Like the CPU pass, an expensive producer is not fused into a consumer that
reads each of its elements several times (a broadcast, or a reduce-less
gather-like reuse), since fusion would recompute it per use.

Recomputation: a cheap producer with other users is duplicated into the
consumer's fusion (the base pass's rule), and so, one by one, are its own
producers, which then have other users too. A long chain of cheap
elementwise ops read by several sibling fusions (a layer norm's backward,
read by reductions over different axes that cannot share one fusion) was
so recomputed whole in every sibling. Below a producer that two or more
reductions read, a fusion takes at most `DUPLICATION_BUDGET` duplicated
elementwise ops (data movement and scalars
are free); past that the chain stays outside, where it becomes a fusion of
its own computed once and read by the siblings: the producer where a
budget ran out is duplicated into no other fusion either.

Code duplication (as XLA's FusionNodeIndexingEvaluation): the fused loop
generates an instruction once per distinct index it is read at. Users that
read their operand at their own index (elementwise ops and copies of the
same shape) share one generation; each index-changing user (slice,
concatenate, transpose, ...) costs one generation per generation of that
user. A producer whose count in a fusion would exceed
`ALLOWED_CODE_DUPLICATION` is not fused into it, so chains of slices and
concatenates that read a value at several shifted indices per step (whose
generation count would grow geometrically with depth) split into several
fusions instead of one exponentially large one.
"""

from __future__ import annotations

from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service import instruction_fusion

O = HloOpcode

# Non-elementwise producers that loop fusion takes.
_LOOP_PRODUCERS = frozenset({
    O.kBroadcast, O.kReshape, O.kTranspose, O.kSlice, O.kIota, O.kConstant,
    O.kBitcast, O.kReverse, O.kPad, O.kConcatenate,
})

# Non-elementwise consumers that a loop fusion may be rooted at.
_LOOP_CONSUMERS = frozenset({
    O.kBroadcast, O.kReshape, O.kTranspose, O.kSlice, O.kBitcast,
    O.kReverse, O.kPad, O.kConcatenate,
})

# Consumers that read an operand element more than once per output element
# set; an expensive producer would be recomputed for each read.
_REUSING_CONSUMERS = frozenset({O.kBroadcast, O.kPad})


def is_loop_fusible_producer(instr: HloInstruction) -> bool:
  return instr.is_elementwise() or instr.opcode in _LOOP_PRODUCERS


def _is_loop_consumer(instr: HloInstruction) -> bool:
  if instr.opcode == O.kFusion:
    return instr.fusion_kind == FusionKind.kLoop
  return instr.is_elementwise() or instr.opcode in _LOOP_CONSUMERS


def _is_reduce_input(consumer: HloInstruction, operand_index: int) -> bool:
  """True if operand `operand_index` of a reduce (or of a kInput fusion)
  is a reduction input and not an init value."""
  if consumer.opcode == O.kReduce:
    return operand_index < consumer.operand_count // 2
  if consumer.opcode == O.kFusion and consumer.fusion_kind == FusionKind.kInput:
    fused = consumer.fused_computation
    param = fused.parameter_instruction(operand_index)
    root = fused.root_instruction
    if root.opcode != O.kReduce:
      return False
    inits = root.operands[root.operand_count // 2:]
    return not any(p is param for p in inits)
  return False


def _reuses_elements(consumer: HloInstruction, producer: HloInstruction
                     ) -> bool:
  """Whether `consumer` reads elements of `producer` more than once."""
  if consumer.opcode == O.kFusion:
    fused = consumer.fused_computation
    index = [i for i, o in enumerate(consumer.operands) if o is producer]
    params = [fused.parameter_instruction(i) for i in index]
    return any(u.opcode in _REUSING_CONSUMERS
               for p in params for u in p.users)
  return consumer.opcode in _REUSING_CONSUMERS


# XLA's kAllowedCodeDuplication.
ALLOWED_CODE_DUPLICATION = 15
_TOO_MANY = None  # a set of indexing users past the allowance


def _reads_at_own_index(user: HloInstruction, operand: HloInstruction) -> bool:
  """Whether `user` reads `operand` at the index it is itself generated at
  (so the two share one generation of `operand` per generation of `user`)."""
  if not (user.is_elementwise() or user.opcode == O.kCopy):
    return False
  return tuple(user.shape.dimensions) == tuple(operand.shape.dimensions)


class _IndexingEvaluation:
  """Per fused computation: for each fused instruction, the set of
  "indexing users" (instructions that read it at an index of their own,
  found through same-index users) with multiplicities, and the number of
  generations that implies. Entries only depend on an instruction's users,
  which fusing further producers (always below) does not change, so they
  are computed once, lazily."""

  def __init__(self, computation):
    self.computation = computation  # keeps ids of its instructions unique
    self._entries: dict[int, tuple] = {}

  def _known(self, instr):
    e = self._entries.get(id(instr))
    return e if e is not None and e[0] is instr else None

  def _compute(self, instr):
    """(instr, {id: (user, weight)} or _TOO_MANY, generations)."""
    if instr.is_root():
      return (instr, {id(instr): (instr, 1)}, 1)
    users: dict[int, tuple] = {}
    for u in instr.users:
      if u.opcode == O.kTuple:  # an output of a multi-output fusion
        users[id(instr)] = (instr, 1)
        continue
      if _reads_at_own_index(u, instr):
        sub = self._known(u)[1]
        if sub is _TOO_MANY:
          return (instr, _TOO_MANY, ALLOWED_CODE_DUPLICATION + 1)
        users.update(sub)
      else:
        users[id(u)] = (u, sum(1 for o in u.operands if o is instr))
    total = 0
    for u, weight in users.values():
      total += self._generations(u) * weight
      if total > ALLOWED_CODE_DUPLICATION:
        return (instr, _TOO_MANY, total)
    return (instr, users, total)

  def _generations(self, instr) -> int:
    if instr.is_root() or instr.opcode == O.kTuple:
      return 1
    return self._entry(instr)[2]

  def _entry(self, instr):
    hit = self._known(instr)
    if hit is not None:
      return hit
    # Users first, from an explicit stack (chains may be long).
    stack = [instr]
    while stack:
      x = stack[-1]
      if self._known(x) is not None:
        stack.pop()
        continue
      missing = [u for u in x.users if u.opcode != O.kTuple and
                 self._known(u) is None]
      if missing and not x.is_root():
        stack.extend(missing)
        continue
      stack.pop()
      self._entries[id(x)] = self._compute(x)
    return self._known(instr)

  def generations_if_fused(self, params) -> int:
    """How often a producer standing behind fused parameters `params`
    would be generated once fused."""
    users: dict[int, tuple] = {}
    for p in params:
      entry = self._entry(p)
      if entry[1] is _TOO_MANY:
        return entry[2]
      users.update(entry[1])
    total = 0
    for u, weight in users.values():
      total += self._generations(u) * weight
    return total


# Duplicated elementwise ops a fusion may take where sibling reductions
# each recompute one chain (see the module docstring); None: no limit.
# BERT's backward: 2974-3676 -> 2296-3003 us. Counted for every
# duplicating fusion, it split the long shared elementwise chains of
# jax.scipy.special into kernels of their own (that workload's step
# 1.0 -> 4.0 ms), so it applies only below a producer that two or more
# reductions read.
DUPLICATION_BUDGET = 8


def _duplication_cost(producer: HloInstruction) -> int:
  """What duplicating `producer` into a fusion adds to its recomputation:
  1 for a non-scalar elementwise op, 0 for data movement and scalars."""
  if not producer.is_elementwise() or not producer.shape.dimensions:
    return 0
  return 1


def _is_reduction(instr: HloInstruction) -> bool:
  return instr.opcode == O.kReduce or (
      instr.opcode == O.kFusion and instr.fusion_kind == FusionKind.kInput)


def _forks_into_reductions(producer: HloInstruction) -> bool:
  """Whether two or more reductions read `producer` (siblings that would
  each recompute it)."""
  return sum(1 for u in producer.users if _is_reduction(u)) >= 2


def _duplicates(producer: HloInstruction, consumer: HloInstruction) -> bool:
  """Whether fusing `producer` into `consumer` leaves the original for
  other users (or as the root)."""
  return producer.is_root() or any(u is not consumer for u in producer.users)


class CpuInstructionFusion(instruction_fusion.InstructionFusion):
  """See the module docstring."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self._evaluations: dict[int, _IndexingEvaluation] = {}
    # id(fused computation) -> (it, duplicated elementwise ops in it).
    self._duplicated: dict[int, tuple] = {}
    # id -> a producer a fusion's budget refused to duplicate; no fusion
    # duplicates it from then on (it is computed once, where it is).
    self._shared: dict[int, HloInstruction] = {}

  def _hit(self, consumer: HloInstruction):
    if consumer.opcode != O.kFusion:
      return None
    fused = consumer.fused_computation
    hit = self._duplicated.get(id(fused))
    return hit if hit is not None and hit[0] is fused else None

  def _duplicated_in(self, consumer: HloInstruction) -> int:
    hit = self._hit(consumer)
    return hit[1] if hit is not None else 0

  def _forked(self, consumer: HloInstruction) -> bool:
    """Whether `consumer`'s duplicated chain is one that sibling
    reductions each recompute."""
    hit = self._hit(consumer)
    return hit is not None and hit[2]

  def fuse(self, producer: HloInstruction,
           consumer: HloInstruction) -> HloInstruction:
    cost = (_duplication_cost(producer)
            if _duplicates(producer, consumer) else 0)
    before = self._duplicated_in(consumer) if cost else 0
    forked = cost and (self._forked(consumer) or
                       _forks_into_reductions(producer))
    fusion = super().fuse(producer, consumer)
    if cost:
      fused = fusion.fused_computation
      self._duplicated[id(fused)] = (fused, before + cost, bool(forked))
    return fusion

  @property
  def name(self) -> str:
    return "cpu-fusion"

  def run(self, module, execution_threads=frozenset()) -> bool:
    self._evaluations = {}
    self._duplicated = {}
    self._shared = {}
    try:
      return super().run(module, execution_threads)
    finally:
      self._evaluations = {}
      self._duplicated = {}
      self._shared = {}

  def _code_duplication_too_high(self, consumer: HloInstruction,
                                 producer: HloInstruction) -> bool:
    if consumer.opcode != O.kFusion or producer.opcode == O.kBroadcast:
      return False  # (a broadcast only costs its operand's generations)
    if not producer.shape.dimensions:
      return False  # a scalar is generated once
    fused = consumer.fused_computation
    ev = self._evaluations.get(id(fused))
    if ev is None or ev.computation is not fused:
      ev = self._evaluations[id(fused)] = _IndexingEvaluation(fused)
    params = [fused.parameter_instruction(i)
              for i, o in enumerate(consumer.operands) if o is producer]
    return ev.generations_if_fused(params) > ALLOWED_CODE_DUPLICATION

  def should_fuse(self, consumer: HloInstruction, operand_index: int) -> bool:
    if not self.can_fuse(consumer, operand_index):
      return False
    producer = consumer.operand(operand_index)
    if not is_loop_fusible_producer(producer):
      return False
    if (instruction_fusion.is_expensive(producer) and
        _reuses_elements(consumer, producer)):
      return False
    if consumer.opcode == O.kReduce or (
        consumer.opcode == O.kFusion and
        consumer.fusion_kind == FusionKind.kInput):
      if not _is_reduce_input(consumer, operand_index):
        return False
    elif not _is_loop_consumer(consumer):
      return False
    if (DUPLICATION_BUDGET is not None and _duplication_cost(producer) and
        _duplicates(producer, consumer) and
        (self._forked(consumer) or _forks_into_reductions(producer))):
      hit = self._shared.get(id(producer))
      if hit is not None and hit is producer:
        return False  # Another fusion's budget stopped here already.
      if (self._duplicated_in(consumer) + _duplication_cost(producer) >
          DUPLICATION_BUDGET):
        # Computed once from now on: no other fusion duplicates it either.
        self._shared[id(producer)] = producer
        return False
    return not self._code_duplication_too_high(consumer, producer)

  def choose_kind(self, producer: HloInstruction,
                  consumer: HloInstruction) -> FusionKind:
    if consumer.opcode == O.kReduce:
      return FusionKind.kInput
    return super().choose_kind(producer, consumer)
