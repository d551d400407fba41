"""Instruction fusion (modelled on xla/service/instruction_fusion.h).

`InstructionFusion` is the base of the backend fusion passes. In each
non-fused computation it visits instructions consumers-first (reverse post
order) and, for every operand of a consumer, asks the subclass's
`should_fuse(consumer, operand_index)`. When the answer is yes the producer
is cloned into the consumer's fusion instruction (a `fusion` whose fused
computation is printed as `calls=`), creating that fusion first when the
consumer is still a plain instruction. The fusion kind comes from
`choose_kind(producer, consumer)`.

Rules kept by the base, whatever the subclass says:
  * parameters, side-effecting instructions (including a call/while/... whose
    computations have side effects), control flow (while, conditional, call),
    tuples and instructions with control dependencies are never fused, as
    producer or consumer; nothing crosses a while/conditional boundary because
    fusion only ever joins instructions of one computation;
  * a producer with users other than the consumer is duplicated into the
    fusion (the original stays for the other users), but only when it is
    cheap (`is_expensive` false) and the pass allows duplication.

`fuse_group` is the shared mechanism (also used by multi-output fusion): it
turns a set of instructions of one computation, some of them fusions, into a
single fusion instruction with one or several outputs.
"""

from __future__ import annotations

from typing import Optional, Sequence

from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.transforms.simplifiers import hlo_dce
from xla.shape import Shape

O = HloOpcode

# Elementwise opcodes whose per-element cost is high enough that XLA would
# rather compute them once than duplicate them into several fusions
# (InstructionFusion::IsExpensive: transcendental and division-like ops).
_EXPENSIVE_ELEMENTWISE = frozenset({
    O.kAcos, O.kAcosh, O.kAsin, O.kAsinh, O.kAtan, O.kAtan2, O.kAtanh,
    O.kCbrt, O.kCos, O.kCosh, O.kDivide, O.kErf, O.kExp, O.kExpm1, O.kLog,
    O.kLog1p, O.kLogistic, O.kPower, O.kRemainder, O.kRsqrt, O.kSin, O.kSinh,
    O.kSqrt, O.kTan, O.kTanh, O.kMap,
})

# Non-elementwise opcodes that only move or generate data; cheap to
# recompute per element.
_CHEAP_NON_ELEMENTWISE = frozenset({
    O.kBitcast, O.kBroadcast, O.kConcatenate, O.kConstant, O.kDynamicSlice,
    O.kGetTupleElement, O.kIota, O.kPad, O.kParameter, O.kReshape,
    O.kReverse, O.kSlice, O.kTranspose, O.kTuple,
})

# Never fused, as producer or as consumer.
_NEVER_FUSED = frozenset({
    O.kParameter, O.kTuple, O.kGetTupleElement, O.kWhile, O.kConditional,
    O.kCall, O.kAfterAll, O.kAddDependency, O.kOptimizationBarrier,
    O.kDomain, O.kCustomCall, O.kAsyncStart, O.kAsyncUpdate, O.kAsyncDone,
    O.kPartitionId, O.kReplicaId, O.kRngBitGenerator,
})


def is_expensive(instr: HloInstruction) -> bool:
  """True if duplicating `instr` into a fusion would repeat real work."""
  if instr.is_elementwise():
    return instr.opcode in _EXPENSIVE_ELEMENTWISE
  if instr.opcode == O.kFusion:
    return any(is_expensive(i)
               for i in instr.fused_computation.instructions)
  return instr.opcode not in _CHEAP_NON_ELEMENTWISE


def is_fusible_at_all(instr: HloInstruction,
                      side_effects: Optional[hlo_dce.SideEffectCache] = None
                      ) -> bool:
  """`side_effects` memoises the side-effect scan of called computations
  (a growing fusion would otherwise be rescanned at every step)."""
  if instr.opcode in _NEVER_FUSED:
    return False
  if instr.control_predecessors or instr.control_successors:
    return False
  cache = side_effects or hlo_dce.SideEffectCache()
  return not cache.instruction(instr)


# -- group fusion ---------------------------------------------------------------


def clone_with_operands(instr: HloInstruction,
                        operands: Sequence[HloInstruction]) -> HloInstruction:
  """An unattached copy of `instr` (not a fusion) on new operands."""
  new = HloInstruction(instr.opcode, instr.shape, operands, name=instr.name)
  for key, value in instr.attrs.items():
    new.set_attr(key, value)
  new.literal = instr.literal
  new.parameter_number = instr.parameter_number
  new.metadata = instr.metadata
  new.frontend_attributes = dict(instr.frontend_attributes)
  new.backend_config = instr.backend_config
  new.sharding = instr.sharding
  return new


def _topological(comp: HloComputation, members: Sequence[HloInstruction]):
  """`members` with each after the members it uses. Only edges between
  members are followed: a path through a non-member would make the fusion
  a cycle, which the callers exclude. (Ordering the whole computation for
  each group made multi-output fusion quadratic in the program's size.)"""
  del comp
  if len(members) == 2 and any(o is members[0]
                               for o in members[1].operands):
    return list(members)  # producer, consumer: no need to order the rest
  ids = {id(m) for m in members}
  order: list[HloInstruction] = []
  done: set[int] = set()
  for start in members:
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
      for op in reversed(list(instr.operands) +
                         list(instr.control_predecessors)):
        if id(op) in ids and id(op) not in done:
          stack.append((op, False))
  return order


def fuse_group(members: Sequence[HloInstruction],
               outputs: Sequence[HloInstruction],
               kind: FusionKind,
               name: str = "fusion") -> HloInstruction:
  """Replaces `members` (all in one computation) by one fusion instruction.

  Fusion members are inlined. Each instruction in `outputs` becomes an output
  of the new fusion: with one output the fusion takes its place; with several
  the fusion's root is a tuple and each output's users read it through a
  get-tuple-element. Members that are not outputs but still have users
  outside the group (duplicated producers) are left in place; the others are
  removed. The caller guarantees that no cycle results. Returns the fusion.
  """
  comp = members[0].parent
  module = comp.parent
  order = _topological(comp, members)
  in_group = {id(m) for m in order}
  fused = HloComputation("fused_computation")
  module.add_embedded_computation(fused)
  inputs: list[HloInstruction] = []
  param_of: dict[int, HloInstruction] = {}

  def value_of(op: HloInstruction, mapped: dict[int, HloInstruction]):
    if id(op) in in_group:
      return mapped[id(op)]
    if id(op) not in param_of:
      param = hi.create_parameter(len(inputs), op.shape,
                                  name=f"param_{len(inputs)}")
      fused.add_parameter(param)
      param_of[id(op)] = param
      inputs.append(op)
    return param_of[id(op)]

  mapped: dict[int, HloInstruction] = {}
  for member in order:
    ops = [value_of(o, mapped) for o in member.operands]
    if member.opcode == O.kFusion:
      mapped[id(member)] = _inline(fused, member.fused_computation, ops)
    else:
      mapped[id(member)] = fused.add_instruction(
          clone_with_operands(member, ops))
  outs = list(outputs)
  if len(outs) == 1:
    fused.set_root_instruction(mapped[id(outs[0])])
    shape = outs[0].shape
  else:
    root = fused.add_instruction(
        hi.create_tuple([mapped[id(o)] for o in outs]))
    fused.set_root_instruction(root)
    shape = Shape.tuple_of(o.shape for o in outs)
  fusion = comp.add_instruction(
      hi.create_fusion(shape, kind, inputs, fused), name=name)
  old_fusions = [m.fused_computation for m in order if m.opcode == O.kFusion]
  for i, out in enumerate(outs):
    if len(outs) == 1:
      replacement = fusion
    else:
      replacement = comp.add_instruction(
          hi.create_get_tuple_element(fusion, i), name=f"{out.name}.gte")
    for user in list(out.users):
      if id(user) not in in_group:
        out.replace_use_with(user, replacement)
    if out.is_root():
      comp.set_root_instruction(replacement)
  for member in reversed(order):
    if not member.users and not member.is_root():
      comp.remove_instruction(member)
  if old_fusions:
    # A fused computation belongs to fusion instructions of the computation
    # the fusion happens in; looking there, not at every instruction of the
    # module, keeps a fusion's cost independent of the module's size.
    still_called = {id(i.fused_computation) for i in comp.instructions
                    if i.opcode == O.kFusion}
    for old in old_fusions:
      if id(old) not in still_called:
        module.remove_computation(old, check_callers=False)
  return fusion


def fuse_into_fusion(producer: HloInstruction, fusion: HloInstruction,
                     kind: FusionKind) -> HloInstruction:
  """Clones the single-output, non-fusion `producer` into the fused
  computation of `fusion` (which uses it), in place: the parameters that
  stood for it are replaced by the clone, its operands become inputs. The
  fusion instruction is rebuilt around the same computation (the operand
  list changes) and returned. Costs O(size of producer), not of the
  fusion, unlike `fuse_group`."""
  comp = fusion.parent
  fused = fusion.fused_computation
  old_inputs = list(fusion.operands)
  # Instructions compare by identity, so list.index / count are identity
  # searches that run in C: this function stays cheap for fusions with
  # hundreds of inputs.
  stale = [i for i in range(len(old_inputs)) if old_inputs[i] is producer] \
      if old_inputs.count(producer) > 1 else [old_inputs.index(producer)]
  param_of: dict[int, HloInstruction] = {}
  added: list[HloInstruction] = []
  operands = []
  for op in producer.operands:
    param = param_of.get(id(op))
    if param is None and op is not producer and op in old_inputs:
      param = fused.parameter_instruction(old_inputs.index(op))
    if param is None:
      n = fused.num_parameters
      param = fused.add_parameter(
          hi.create_parameter(n, op.shape, name=f"param_{n}"))
      added.append(op)
    param_of[id(op)] = param
    operands.append(param)
  clone = fused.add_instruction(clone_with_operands(producer, operands))
  for i in reversed(stale):
    fused.parameter_instruction(i).replace_all_uses_with(clone)
    fused.remove_parameter(i)
  stale_ids = set(stale)
  inputs = [op for i, op in enumerate(old_inputs)
            if i not in stale_ids] + added
  # The fusion instruction is updated in place (as XLA's FuseInstruction
  # does): rebuilding it cost a new instruction, a unique name and a
  # rewiring of its users per fused producer, most of the fusion pass's
  # time on programs with long elementwise chains.
  fusion.set_operands(inputs)
  if fusion.fusion_kind != kind:
    fusion.set_attr("kind", kind)
  if not producer.users and not producer.is_root():
    comp.remove_instruction(producer)
  return fusion


def _inline(target: HloComputation, source: HloComputation,
            args: Sequence[HloInstruction]) -> HloInstruction:
  """Clones `source`'s instructions into `target` with its parameters
  bound to `args`; returns the clone of its root."""
  mapped: dict[int, HloInstruction] = {}
  for instr in source.make_instruction_post_order():
    if instr.opcode == O.kParameter:
      mapped[id(instr)] = args[instr.parameter_number]
    else:
      mapped[id(instr)] = target.add_instruction(
          clone_with_operands(instr, [mapped[id(o)]
                                      for o in instr.operands]))
  return mapped[id(source.root_instruction)]


# -- the pass -------------------------------------------------------------------


class InstructionFusion(hpi.HloModulePass):
  """See the module docstring. Subclasses implement `should_fuse` and may
  override `choose_kind`."""

  def __init__(self, may_duplicate: bool = True):
    self.may_duplicate = may_duplicate
    # One side-effect cache per run: fusing only ever adds side-effect-free
    # instructions to a fused computation, so cached answers stay valid.
    self._side_effects: Optional[hlo_dce.SideEffectCache] = None
    # id -> (instruction, is_fusible_at_all), per run. An answer stays
    # right while the pass runs: fusing adds no control dependencies, and
    # a fusion only ever gains side-effect-free instructions.
    self._fusible: dict[int, tuple[HloInstruction, bool]] = {}

  @property
  def name(self) -> str:
    return "fusion"

  # -- hooks -------------------------------------------------------------------

  def should_fuse(self, consumer: HloInstruction, operand_index: int) -> bool:
    """Whether operand `operand_index` of `consumer` should be fused into it.
    The base only applies the universal rules (see `can_fuse`)."""
    return self.can_fuse(consumer, operand_index)

  def choose_kind(self, producer: HloInstruction,
                  consumer: HloInstruction) -> FusionKind:
    if consumer.opcode == O.kFusion:
      return consumer.fusion_kind
    return FusionKind.kLoop

  # -- rules -------------------------------------------------------------------

  def can_fuse(self, consumer: HloInstruction, operand_index: int) -> bool:
    """The universal legality rules of the module docstring."""
    producer = consumer.operand(operand_index)
    if not self._is_fusible(producer) or not self._is_fusible(consumer):
      return False
    if producer.opcode == O.kFusion:
      return False  # merging fusions is FusionMerger's business
    if consumer.opcode == O.kFusion and consumer.fusion_kind not in (
        FusionKind.kLoop, FusionKind.kInput, FusionKind.kOutput):
      return False
    if producer.shape.is_tuple():
      return False
    other_users = [u for u in producer.users if u is not consumer]
    if other_users or producer.is_root():
      if not self.may_duplicate or is_expensive(producer):
        return False
    return True

  def _is_fusible(self, instr: HloInstruction) -> bool:
    """`is_fusible_at_all`, asked once per instruction and run (the fusion
    pass asks it of both sides of every candidate pair; on the GPT
    training step that was a third of the pass)."""
    hit = self._fusible.get(id(instr))
    if hit is not None and hit[0] is instr:
      return hit[1]
    answer = is_fusible_at_all(instr, self._side_effects)
    self._fusible[id(instr)] = (instr, answer)
    return answer

  # -- driver ------------------------------------------------------------------

  def fuse(self, producer: HloInstruction,
           consumer: HloInstruction) -> HloInstruction:
    """Fuses `producer` into `consumer`; returns the (new) fusion."""
    kind = self.choose_kind(producer, consumer)
    if (consumer.opcode == O.kFusion and producer.opcode != O.kFusion and
        not producer.shape.is_tuple()):
      return fuse_into_fusion(producer, consumer, kind)
    return fuse_group([producer, consumer], [consumer], kind)

  def run_on_computation(self, comp: HloComputation) -> bool:
    changed = False
    post_order = comp.make_instruction_post_order()
    position = {id(instr): k for k, instr in enumerate(post_order)}
    for consumer in reversed(post_order):
      if consumer.parent is not comp:
        continue  # removed by an earlier fusion
      current = consumer
      # Producers a fusion `current` refused, by id: asked again only once
      # something that can change the answer happened (see below).
      refused: dict[int, HloInstruction] = {}
      progress = True
      while progress:
        progress = False
        operands = current.operands
        # Operands latest in post order first (as XLA's fusion queue does):
        # a producer P used by the consumer and by another operand B of it
        # is then fused after B, when all its users are inside the fusion,
        # instead of being duplicated once for the consumer and again for
        # B. Duplicating at every such diamond grows a chain of diamonds
        # (a hash's rounds) exponentially.
        keys = [position.get(id(op), -1) for op in operands]
        order = sorted(range(len(keys)), key=keys.__getitem__,
                       reverse=True)  # stable, like sorting on -key
        # The answers for a fusion's operand depend on the operand, its
        # users and what reads its parameter inside the fusion; fusing a
        # producer Q changes those only for Q's own operands (Q leaves
        # their users; Q's clone reads their parameters) and otherwise
        # only tightens (duplication budgets grow). So a refused operand
        # is asked again only when it is an operand of a fused producer.
        # Not for plain consumers (a reduce asks per operand index) or
        # fusions listing an operand twice.
        remember = (current.opcode == O.kFusion and
                    len(set(operands)) == len(operands))
        for i in order:
          producer = operands[i]
          if remember and refused.get(id(producer)) is producer:
            continue
          if self.should_fuse(current, i):
            if remember:
              for op in producer.operands:
                refused.pop(id(op), None)
            fused = self.fuse(producer, current)
            if fused is not current:
              refused = {}
            current = fused
            changed = progress = True
            break
          if remember:
            refused[id(producer)] = producer
    return changed

  def run(self, module, execution_threads=frozenset()) -> bool:
    changed = False
    self._side_effects = hlo_dce.SideEffectCache()
    self._fusible = {}
    try:
      applied = applied_functions(module)
      for comp in hpi.computations_to_run(module, execution_threads):
        if comp.is_fusion_computation() or comp.parent is not module:
          continue
        if id(comp) in applied:
          continue
        changed |= self.run_on_computation(comp)
    finally:
      self._side_effects = None
      self._fusible = {}
    return changed


_CALL_LIKE = frozenset({O.kCall, O.kWhile, O.kConditional, O.kFusion,
                        O.kAsyncStart})


def is_applied_function(module, comp) -> bool:
  """True for reducers and other to_apply computations of non-call ops:
  scalar helper computations that backends emit inline, not fuse."""
  for instr in module.instructions():
    if instr.opcode in _CALL_LIKE:
      continue
    if any(c is comp for c in instr.called_computations()):
      return True
  return False


def applied_functions(module) -> set[int]:
  """The ids of every computation `is_applied_function` holds for, found
  in one scan of the module.

  The fusion passes take this set once, before they visit computations
  callees first: fusing only clones instructions (keeping what they call)
  and removes the originals, and a computation's callers are visited after
  it, so the answer for a computation not yet visited cannot change."""
  applied: set[int] = set()
  calling = hlo_attrs.CALLING_OPCODES
  for instr in module.instructions():
    if instr.opcode not in calling or instr.opcode in _CALL_LIKE:
      continue
    for c in instr.called_computations():
      applied.add(id(c))
  return applied


def count_fusions(comp: HloComputation,
                  kind: Optional[FusionKind] = None) -> int:
  """Number of fusion instructions in `comp` (of `kind`, if given)."""
  return sum(1 for i in comp.instructions if i.opcode == O.kFusion and
             (kind is None or i.fusion_kind == kind))
