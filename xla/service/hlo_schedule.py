"""A sequential order of instructions per computation (modelled on XLA's
xla/hlo/ir/hlo_schedule.h).

An `HloSchedule` maps each scheduled computation to the order in which its
instructions run. `verify()` checks that every instruction of a scheduled
computation appears exactly once and after its operands and control
predecessors.
"""

from __future__ import annotations

from typing import Iterable

import support
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_module import HloModule


class HloSchedule:
  """See the module docstring."""

  def __init__(self, module: HloModule):
    self.module = module
    self._sequences: dict[int, list[HloInstruction]] = {}
    self._computations: dict[int, HloComputation] = {}

  def set_sequence(self, computation: HloComputation,
                   sequence: Iterable[HloInstruction]) -> None:
    self._sequences[id(computation)] = list(sequence)
    self._computations[id(computation)] = computation

  def sequence(self, computation: HloComputation) -> list[HloInstruction]:
    try:
      return self._sequences[id(computation)]
    except KeyError:
      raise support.NotFoundError(
          f"computation {computation.name} is not scheduled") from None

  def is_computation_scheduled(self, computation: HloComputation) -> bool:
    return id(computation) in self._sequences

  @property
  def computations(self) -> list[HloComputation]:
    return list(self._computations.values())

  def verify(self) -> None:
    for key, seq in self._sequences.items():
      comp = self._computations[key]
      position = {}
      for i, instr in enumerate(seq):
        if instr.parent is not comp:
          raise support.FailedPreconditionError(
              f"schedule of {comp.name} holds {instr.name} of another "
              f"computation")
        if id(instr) in position:
          raise support.FailedPreconditionError(
              f"schedule of {comp.name} holds {instr.name} twice")
        position[id(instr)] = i
      if len(position) != comp.instruction_count:
        missing = [x.name for x in comp.instructions if id(x) not in position]
        raise support.FailedPreconditionError(
            f"schedule of {comp.name} misses {', '.join(missing)}")
      for instr in seq:
        for dep in list(instr.operands) + list(instr.control_predecessors):
          if position[id(dep)] > position[id(instr)]:
            raise support.FailedPreconditionError(
                f"schedule of {comp.name} runs {instr.name} before its "
                f"dependency {dep.name}")

  def to_string(self) -> str:
    lines = []
    for key, seq in self._sequences.items():
      lines.append(f"computation {self._computations[key].name}:")
      lines.extend(f"  {instr.name}" for instr in seq)
    return "\n".join(lines)


def schedule_from_text_order(module: HloModule,
                             computations: Iterable[HloComputation]
                             ) -> HloSchedule:
  """The schedule a module's text gives (its instruction order, made
  dependency-respecting), e.g. for `is_scheduled=true` modules."""
  schedule = HloSchedule(module)
  for comp in computations:
    schedule.set_sequence(comp, comp.instructions_in_stable_order())
  schedule.verify()
  return schedule
