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


class CpuInstructionFusion(instruction_fusion.InstructionFusion):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "cpu-fusion"

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
      return _is_reduce_input(consumer, operand_index)
    return _is_loop_consumer(consumer)

  def choose_kind(self, producer: HloInstruction,
                  consumer: HloInstruction) -> FusionKind:
    if consumer.opcode == O.kReduce:
      return FusionKind.kInput
    return super().choose_kind(producer, consumer)
