"""HLO modules (xla/hlo/ir/hlo_module.h) and their config.

A module owns computations, one of which is the entry. Adding a computation
makes its name, and the names of its instructions, unique within the module
(`name`, `name.1`, ... as XLA's NameUniquer does). The module also carries
what the HLO text header holds: the config (entry computation layout, replica
and partition counts, SPMD flags), input/output aliasing, buffer donors,
frontend attributes, the stack frame index and the `is_scheduled` flag.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

import support
from xla import shape_util
from xla import xla_data
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_printer
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.service.name_uniquer import NameUniquer
from xla.shape import ProgramShape
from xla.shape import Shape


@dataclasses.dataclass
class HloModuleConfig:
  """The parts of xla::HloModuleConfig that HLO text carries."""

  entry_computation_layout: Optional[ProgramShape] = None
  replica_count: int = 1
  num_partitions: int = 1
  use_spmd_partitioning: bool = False
  alias_passthrough_params: bool = False
  allow_spmd_sharding_propagation_to_parameters: tuple[bool, ...] = (False,)
  allow_spmd_sharding_propagation_to_output: tuple[bool, ...] = (False,)


@dataclasses.dataclass(frozen=True)
class InputOutputAlias:
  """`{output_index}: (parameter, {parameter_index}, kind)`."""

  output_index: tuple[int, ...]
  parameter_number: int
  parameter_index: tuple[int, ...]
  must_alias: bool = False


@dataclasses.dataclass(frozen=True)
class BufferDonor:
  parameter_number: int
  parameter_index: tuple[int, ...]


class HloModule:
  """See the module docstring."""

  def __init__(self, name: str, config: Optional[HloModuleConfig] = None):
    self.name = name
    self.config = config or HloModuleConfig()
    self._computations: list[HloComputation] = []
    self.entry_computation: Optional[HloComputation] = None
    self.is_scheduled = False
    self.input_output_aliases: list[InputOutputAlias] = []
    self.buffer_donors: list[BufferDonor] = []
    self.frontend_attributes: dict[str, str] = {}
    self.stack_frame_index: Optional[xla_data.StackFrameIndex] = None
    self.origin_recovery_table: Optional[hlo_attrs.RawText] = None
    self._computation_names = NameUniquer()
    self._instruction_names = NameUniquer()

  # -- computations ------------------------------------------------------------

  @property
  def computations(self) -> tuple[HloComputation, ...]:
    """All computations, in the order they were added."""
    return tuple(self._computations)

  @property
  def computation_count(self) -> int:
    return len(self._computations)

  def unique_instruction_name(self, name: str) -> str:
    return self._instruction_names.get_unique_name(name)

  def add_computation(self, computation: HloComputation,
                      is_entry: bool = False) -> HloComputation:
    if computation.parent is not None:
      raise support.FailedPreconditionError(
          f"computation {computation.name} already belongs to module "
          f"{computation.parent.name}")
    if is_entry and self.entry_computation is not None:
      raise support.FailedPreconditionError(
          f"module {self.name} already has entry computation "
          f"{self.entry_computation.name}")
    computation.name = self._computation_names.get_unique_name(
        computation.name)
    for instr in computation.instructions:
      instr.name = self._instruction_names.get_unique_name(instr.name)
    computation.parent = self
    self._computations.append(computation)
    if is_entry:
      self.entry_computation = computation
    return computation

  def add_entry_computation(self,
                            computation: HloComputation) -> HloComputation:
    return self.add_computation(computation, is_entry=True)

  def add_embedded_computation(
      self, computation: HloComputation) -> HloComputation:
    return self.add_computation(computation, is_entry=False)

  def remove_computation(self, computation: HloComputation, *,
                         check_callers: bool = True) -> None:
    """Removes a computation that no instruction calls. `check_callers`
    False skips the scan of the whole module for callers, for a caller that
    knows there are none."""
    if computation is self.entry_computation:
      raise support.FailedPreconditionError(
          f"cannot remove the entry computation {computation.name}")
    callers = [i.name for i in self.instructions()
               if any(c is computation for c in i.called_computations())
               ] if check_callers else []
    if callers:
      raise support.FailedPreconditionError(
          f"cannot remove computation {computation.name}: called by "
          f"{', '.join(callers)}")
    self._computations = [c for c in self._computations
                          if c is not computation]
    computation.parent = None

  def get_computation_with_name(self, name: str) -> Optional[HloComputation]:
    for c in self._computations:
      if c.name == name:
        return c
    return None

  def instructions(self) -> Iterator[HloInstruction]:
    for c in self._computations:
      yield from c.instructions

  def make_computation_post_order(self) -> list[HloComputation]:
    """Callees before callers; roots (uncalled computations) in module
    order, each preceded by the computations it reaches."""
    # Each computation's callees, in instruction order, found once.
    callees: dict[int, list[HloComputation]] = {}

    calling = hlo_attrs.CALLING_OPCODES

    def callees_of(comp: HloComputation) -> list[HloComputation]:
      found = callees.get(id(comp))
      if found is None:
        # Most instructions call nothing: tested by opcode inline (this
        # scans every instruction of the module, once per pass).
        found = [callee for instr in comp.iter_instructions()
                 if instr.opcode in calling
                 for callee in instr.called_computations()]
        callees[id(comp)] = found
      return found

    called = {id(c) for comp in self._computations for c in callees_of(comp)}
    order: list[HloComputation] = []
    seen: set[int] = set()

    def visit(comp: HloComputation) -> None:
      if id(comp) in seen:
        return
      seen.add(id(comp))
      for callee in callees_of(comp):
        visit(callee)
      order.append(comp)

    for comp in self._computations:
      if id(comp) not in called:
        visit(comp)
    for comp in self._computations:  # computations only in call cycles
      visit(comp)
    return order

  def computations_in_stable_order(self) -> list[HloComputation]:
    """The module order, minimally changed so callees precede callers."""
    order: list[HloComputation] = []
    placed: set[int] = set()

    def place(comp: HloComputation, path: tuple[int, ...]) -> None:
      if id(comp) in placed:
        return
      if id(comp) in path:
        raise support.FailedPreconditionError(
            f"computation {comp.name} calls itself")
      for instr in comp.instructions:
        for callee in instr.called_computations():
          place(callee, path + (id(comp),))
      placed.add(id(comp))
      order.append(comp)

    for comp in self._computations:
      place(comp, ())
    return order

  # -- layouts and shapes ------------------------------------------------------

  def entry_computation_layout(self) -> ProgramShape:
    """The configured entry layout, else the entry's own shapes with missing
    layouts set to the defaults."""
    if self.config.entry_computation_layout is not None:
      return self.config.entry_computation_layout
    if self.entry_computation is None:
      raise support.FailedPreconditionError(
          f"module {self.name} has no entry computation")
    ps = self.entry_computation.program_shape()
    return ProgramShape(
        tuple(shape_util.with_default_layouts(s) for s in ps.parameters),
        shape_util.with_default_layouts(ps.result))

  def result_shape(self) -> Shape:
    return self.entry_computation_layout().result

  # -- text --------------------------------------------------------------------

  def to_string(self, options: Optional[hlo_printer.HloPrintOptions] = None
                ) -> str:
    return hlo_printer.module_to_string(self, options)

  def __str__(self) -> str:
    return self.to_string()

  def __repr__(self) -> str:
    return f"<HloModule {self.name}>"

  def clone(self, name: Optional[str] = None) -> "HloModule":
    """A deep copy: new computations and instructions, same names, config
    and header data."""
    module = HloModule(name or self.name, dataclasses.replace(self.config))
    module.is_scheduled = self.is_scheduled
    module.input_output_aliases = list(self.input_output_aliases)
    module.buffer_donors = list(self.buffer_donors)
    module.frontend_attributes = dict(self.frontend_attributes)
    module.stack_frame_index = self.stack_frame_index
    module.origin_recovery_table = self.origin_recovery_table
    comp_map: dict[int, HloComputation] = {}
    for comp in self.computations_in_stable_order():
      comp_map[id(comp)] = clone_computation(comp, comp_map)
    for comp in self._computations:
      module.add_computation(comp_map[id(comp)],
                             is_entry=comp is self.entry_computation)
    return module


def _remap(value, comp_map):
  if isinstance(value, HloComputation):
    return comp_map[id(value)]
  if isinstance(value, tuple) and value and isinstance(value[0],
                                                       HloComputation):
    return tuple(comp_map[id(c)] for c in value)
  return value


def clone_computation(comp: HloComputation, comp_map) -> HloComputation:
  """Copies `comp`; the computations it calls must already be in comp_map."""
  clone = HloComputation(comp.name)
  clone.execution_thread = comp.execution_thread
  instr_map: dict[int, HloInstruction] = {}
  for old in comp.instructions_in_stable_order():
    new = HloInstruction(old.opcode, old.shape,
                         [instr_map[id(o)] for o in old.operands],
                         name=old.name)
    for key, value in old.attrs.items():
      new.set_attr(key, _remap(value, comp_map))
    new.literal = old.literal
    new.parameter_number = old.parameter_number
    new.metadata = old.metadata
    new.frontend_attributes = dict(old.frontend_attributes)
    new.sharding = old.sharding
    new.backend_config = old.backend_config
    new.statistics = old.statistics
    new.origin = old.origin
    new.parameter_replication = old.parameter_replication
    for pred in old.control_predecessors:
      instr_map[id(pred)].add_control_dependency_to(new)
    instr_map[id(old)] = new
    clone.add_instruction(new)
  clone.set_root_instruction(instr_map[id(comp.root_instruction)])
  return clone
