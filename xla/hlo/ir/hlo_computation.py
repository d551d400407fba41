"""HLO computations (xla/hlo/ir/hlo_computation.h).

A computation owns an ordered list of instructions, its parameter
instructions (indexed by parameter number) and a root instruction whose value
it returns. Operands of an instruction must belong to the same computation.
"""

from __future__ import annotations

from typing import Iterator, Optional

import support
from xla import shape_util
from xla.hlo.ir import hlo_printer
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.shape import ProgramShape

MAIN_EXECUTION_THREAD = "main"


class HloComputation:
  """See the module docstring."""

  def __init__(self, name: str):
    self.name = name
    # id -> instruction, in the order they were added (a dict, so that
    # removing one is not a scan of the computation).
    self._instructions: dict[int, HloInstruction] = {}
    self._params: dict[int, HloInstruction] = {}
    self.root_instruction: Optional[HloInstruction] = None
    self.parent = None  # the HloModule holding this computation
    self.execution_thread = MAIN_EXECUTION_THREAD
    self.fusion_instruction: Optional[HloInstruction] = None

  # -- instructions ------------------------------------------------------------

  @property
  def instructions(self) -> tuple[HloInstruction, ...]:
    """All instructions, in the order they were added."""
    return tuple(self._instructions.values())

  def iter_instructions(self) -> Iterator[HloInstruction]:
    """The instructions in the order they were added, without the copy
    `instructions` makes; the computation must not change meanwhile."""
    return iter(self._instructions.values())

  @property
  def instruction_count(self) -> int:
    return len(self._instructions)

  @property
  def parameter_instructions(self) -> tuple[HloInstruction, ...]:
    return tuple(self._params[i] for i in sorted(self._params))

  def parameter_instruction(self, number: int) -> HloInstruction:
    try:
      return self._params[number]
    except KeyError:
      raise support.NotFoundError(
          f"computation {self.name} has no parameter {number}") from None

  @property
  def num_parameters(self) -> int:
    return len(self._params)

  def add_instruction(self, instruction: HloInstruction,
                      name: Optional[str] = None) -> HloInstruction:
    """Appends `instruction` (its operands must already be here)."""
    if instruction.parent is not None:
      raise support.FailedPreconditionError(
          f"instruction {instruction.name} already belongs to computation "
          f"{instruction.parent.name}")
    for op in instruction.operands:
      if op.parent is not self:
        raise support.InvalidArgumentError(
            f"operand {op.name} of {instruction.name} does not belong to "
            f"computation {self.name}")
    if instruction.opcode == HloOpcode.kParameter:
      number = instruction.parameter_number
      if number is None or number < 0:
        raise support.InvalidArgumentError(
            f"parameter {instruction.name} has no valid parameter number")
      if number in self._params:
        raise support.InvalidArgumentError(
            f"computation {self.name} already has parameter {number} "
            f"({self._params[number].name})")
      self._params[number] = instruction
    if name is not None:
      instruction.name = name
    if self.parent is not None:
      instruction.name = self.parent.unique_instruction_name(instruction.name)
    instruction.parent = self
    self._instructions[id(instruction)] = instruction
    return instruction

  def add_parameter(self, instruction: HloInstruction) -> HloInstruction:
    if instruction.opcode != HloOpcode.kParameter:
      raise support.InvalidArgumentError(
          f"{instruction.name} is not a parameter")
    return self.add_instruction(instruction)

  def set_root_instruction(self, instruction: HloInstruction) -> None:
    if instruction.parent is not self:
      raise support.InvalidArgumentError(
          f"root {instruction.name} does not belong to computation "
          f"{self.name}")
    self.root_instruction = instruction

  def remove_instruction(self, instruction: HloInstruction) -> None:
    """Removes an instruction that nothing uses (not the root)."""
    if instruction.parent is not self:
      raise support.InvalidArgumentError(
          f"{instruction.name} is not in computation {self.name}")
    if instruction.users:
      raise support.FailedPreconditionError(
          f"cannot remove {instruction.name}: it is used by "
          f"{', '.join(u.name for u in instruction.users)}")
    if instruction is self.root_instruction:
      raise support.FailedPreconditionError(
          f"cannot remove the root {instruction.name} of {self.name}")
    if instruction.opcode == HloOpcode.kParameter:
      raise support.FailedPreconditionError(
          f"cannot remove parameter {instruction.name} with "
          f"remove_instruction; use remove_parameter")
    self._detach(instruction)

  def _detach(self, instruction: HloInstruction) -> None:
    instruction.drop_all_control_deps()
    instruction.detach_operands()
    if self._instructions.get(id(instruction)) is instruction:
      del self._instructions[id(instruction)]
    instruction.parent = None

  def remove_parameter(self, number: int) -> None:
    """Removes an unused parameter and renumbers the later ones."""
    param = self.parameter_instruction(number)
    if param.users or param is self.root_instruction:
      raise support.FailedPreconditionError(
          f"cannot remove parameter {param.name}: it is used")
    self._detach(param)
    del self._params[number]
    for n in sorted(k for k in self._params if k > number):
      p = self._params.pop(n)
      p.parameter_number = n - 1
      self._params[n - 1] = p

  def remove_instruction_and_unused_operands(
      self, instruction: HloInstruction) -> None:
    """Removes `instruction` and, transitively, operands left unused
    (parameters and side-effecting instructions are kept)."""
    worklist = [instruction]
    while worklist:
      instr = worklist.pop()
      if (instr.parent is not self or instr.users or
          instr is self.root_instruction or
          instr.opcode == HloOpcode.kParameter or instr.has_side_effect() or
          instr.control_successors):
        continue
      operands = list(dict.fromkeys(instr.operands))
      self._detach(instr)
      worklist.extend(operands)

  def replace_instruction(self, old: HloInstruction,
                          new: HloInstruction) -> None:
    """Redirects every use of `old` (and the root) to `new`, then removes
    `old` and operands left unused. Shapes must be compatible."""
    if not shape_util.compatible(old.shape, new.shape):
      raise support.InvalidArgumentError(
          f"cannot replace {old.name} of shape {old.shape.to_string()} with "
          f"{new.name} of shape {new.shape.to_string()}")
    if new.metadata.is_empty():
      new.metadata = old.metadata
    old.replace_all_uses_with(new)
    self.remove_instruction_and_unused_operands(old)

  # -- orders ------------------------------------------------------------------

  def make_instruction_post_order(self) -> list[HloInstruction]:
    """Operands (and control predecessors) before users, every instruction
    once; XLA's order: a DFS from each user-less instruction in turn,
    visiting control predecessors, then operands first to last."""
    # Instructions hash by identity; operands are walked without copying
    # them (`operands` would copy): every pass asks for this order, once per
    # computation.
    order: list[HloInstruction] = []
    done: set[HloInstruction] = set()
    for start in self._instructions.values():
      if start.user_count or start in done:
        continue
      stack = [(start, False)]
      push = stack.append
      while stack:
        instr, expanded = stack.pop()
        if instr in done:
          continue
        if expanded:
          done.add(instr)
          order.append(instr)
          continue
        push((instr, True))
        for op in instr.operands_reversed():
          if op not in done:
            push((op, False))
        for p in instr.control_predecessors:
          if p not in done:
            push((p, False))
    return order

  def instructions_in_stable_order(self) -> list[HloInstruction]:
    """The insertion order, minimally changed so that every instruction
    comes after its operands and control predecessors."""
    order: list[HloInstruction] = []
    placed: set[HloInstruction] = set()  # instructions hash by identity
    visiting: set[HloInstruction] = set()
    for start in self._instructions.values():
      if start in placed:
        continue
      stack = [(start, False)]
      while stack:
        instr, expanded = stack.pop()
        if instr in placed:
          continue
        if expanded:
          visiting.discard(instr)
          placed.add(instr)
          order.append(instr)
          continue
        if instr in visiting:
          raise support.FailedPreconditionError(
              f"cycle through {instr.name} in computation {self.name}")
        visiting.add(instr)
        stack.append((instr, True))
        for dep in reversed(instr.control_predecessors):
          if dep not in placed:
            stack.append((dep, False))
        for dep in instr.operands_reversed():
          if dep not in placed:
            stack.append((dep, False))
    return order

  # -- properties --------------------------------------------------------------

  def program_shape(self) -> ProgramShape:
    params = self.parameter_instructions
    if self.root_instruction is None:
      raise support.FailedPreconditionError(
          f"computation {self.name} has no root")
    return ProgramShape(tuple(p.shape for p in params),
                        self.root_instruction.shape,
                        tuple(p.name for p in params))

  def is_fusion_computation(self) -> bool:
    return self.fusion_instruction is not None

  def is_entry_computation(self) -> bool:
    return (self.parent is not None and
            self.parent.entry_computation is self)

  def get_instruction_with_name(self, name: str) -> Optional[HloInstruction]:
    for instr in self._instructions.values():
      if instr.name == name:
        return instr
    return None

  def to_string(self, options: Optional[hlo_printer.HloPrintOptions] = None
                ) -> str:
    return hlo_printer.computation_to_string(self, options)

  def __str__(self) -> str:
    return self.to_string()

  def __repr__(self) -> str:
    return f"<HloComputation {self.name}>"
