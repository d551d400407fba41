"""HLO instructions (xla/hlo/ir/hlo_instruction.h).

One class serves every opcode. An instruction has an opcode, a result shape,
ordered operands (its users are tracked automatically), opcode-specific
attributes in `attrs` (schema: `hlo_attrs.OPCODE_ATTRS`), and the attributes
any instruction may carry as fields: metadata, frontend_attributes,
sharding, backend_config, statistics, origin, parameter_replication, control
predecessors. Constants hold a `Literal`, parameters their number.

Instructions are created unattached, e.g. with the `create_*` helpers below,
and placed with `HloComputation.add_instruction`.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Iterator, Optional, Sequence

import support
from xla import xla_data
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_opcode
from xla.hlo.ir import hlo_printer
from xla.hlo.ir.hlo_attrs import AttrKind
from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.literal import Literal
from xla.shape import Shape

_ids = itertools.count()


class HloInstruction:
  """See the module docstring."""

  def __init__(self, opcode: HloOpcode, shape: Shape,
               operands: Sequence["HloInstruction"] = (),
               attrs: Optional[dict[str, Any]] = None,
               name: Optional[str] = None):
    if not isinstance(shape, Shape):
      raise support.InvalidArgumentError(
          f"instruction shape must be a Shape, got {type(shape).__name__}")
    self.opcode = opcode
    self.shape = shape
    self.name = name or opcode.value
    self.unique_id = next(_ids)
    self.parent = None  # the HloComputation holding this instruction
    self._operands: list[HloInstruction] = []
    # Users in the order they started using this instruction, as dict keys
    # (instructions hash by identity): adding, finding and removing one is
    # O(1), where a list made removing an operand of a producer with
    # thousands of users (a PRNG key, a broadcast scalar) a scan of them.
    self._users: dict[HloInstruction, None] = {}
    self.attrs: dict[str, Any] = {}
    self.literal: Optional[Literal] = None
    self.parameter_number: Optional[int] = None
    # Common attributes.
    self.metadata = xla_data.OpMetadata()
    self.frontend_attributes: dict[str, str] = {}
    self.sharding: Optional[hlo_attrs.RawText] = None
    self.backend_config = ""
    self.statistics: Optional[hlo_attrs.RawText] = None
    self.origin: Optional[hlo_attrs.RawText] = None
    self.parameter_replication: Optional[tuple[bool, ...]] = None
    self.control_predecessors: list[HloInstruction] = []
    self.control_successors: list[HloInstruction] = []
    for op in operands:
      self.append_operand(op)
    for key, value in (attrs or {}).items():
      self.set_attr(key, value)

  # -- operands and users ------------------------------------------------------

  @property
  def operands(self) -> tuple["HloInstruction", ...]:
    return tuple(self._operands)

  def operand(self, i: int) -> "HloInstruction":
    return self._operands[i]

  @property
  def operand_count(self) -> int:
    return len(self._operands)

  def operands_reversed(self) -> Iterator["HloInstruction"]:
    """The operands last to first without copying them (unlike `operands`);
    the operands must not change while the iterator is in use."""
    return reversed(self._operands)

  @property
  def users(self) -> tuple["HloInstruction", ...]:
    return tuple(self._users)

  @property
  def user_count(self) -> int:
    return len(self._users)

  def has_user(self, instruction: "HloInstruction") -> bool:
    """Whether `instruction` uses this one (O(1), unlike a search of
    `users`)."""
    return instruction in self._users

  def append_operand(self, operand: "HloInstruction") -> None:
    if not isinstance(operand, HloInstruction):
      raise support.InvalidArgumentError(
          f"operand of {self.name} must be an HloInstruction, got "
          f"{type(operand).__name__}")
    self._operands.append(operand)
    operand._users[self] = None

  def _drop_user_if_unused(self, operand: "HloInstruction") -> None:
    # Instructions compare by identity and a user is listed once, so the
    # list's own (C) search and removal do what loops in Python did, for
    # fusions of many operands and producers of many users.
    if operand not in self._operands:
      operand._drop_user(self)

  def _drop_user(self, user: "HloInstruction") -> None:
    self._users.pop(user, None)

  def replace_operand_with(self, index: int,
                           new_operand: "HloInstruction") -> None:
    old = self._operands[index]
    if old is new_operand:
      return
    self._operands[index] = new_operand
    new_operand._users[self] = None
    self._drop_user_if_unused(old)

  def replace_use_with(self, user: "HloInstruction",
                       new_producer: "HloInstruction") -> None:
    """Makes `user` use `new_producer` wherever it used this instruction."""
    for i, op in enumerate(user._operands):
      if op is self:
        user.replace_operand_with(i, new_producer)

  def replace_all_uses_with(self, new_producer: "HloInstruction") -> None:
    """Redirects every user (and the computation root) to `new_producer`."""
    if new_producer is self:
      return
    for user in list(self._users):
      self.replace_use_with(user, new_producer)
    if self.parent is not None and self.parent.root_instruction is self:
      self.parent.set_root_instruction(new_producer)

  def set_operands(self, operands: Sequence["HloInstruction"]) -> None:
    """Replaces the whole operand list, keeping the user lists of old and
    new operands right (one pass, where removing and appending one operand
    at a time would cost a scan of the list each)."""
    # Instructions hash and compare by identity: these sets are identity
    # sets built in C. Each operand's user list changes at most once.
    before = set(self._operands)
    self._operands = list(operands)
    after = set(self._operands)
    for op in before - after:
      op._drop_user(self)
    for op in after - before:
      op._users[self] = None

  def detach_operands(self) -> None:
    """Removes this instruction from its operands' user lists."""
    for op in set(self._operands):
      op._drop_user(self)
    self._operands = []

  # -- control dependencies ----------------------------------------------------

  def add_control_dependency_to(self, successor: "HloInstruction") -> None:
    if successor not in self.control_successors:
      self.control_successors.append(successor)
      successor.control_predecessors.append(self)

  def remove_control_dependency_to(self, successor: "HloInstruction") -> None:
    self.control_successors = [s for s in self.control_successors
                               if s is not successor]
    successor.control_predecessors = [
        p for p in successor.control_predecessors if p is not self]

  def drop_all_control_deps(self) -> None:
    for p in list(self.control_predecessors):
      p.remove_control_dependency_to(self)
    for s in list(self.control_successors):
      self.remove_control_dependency_to(s)

  # -- attributes --------------------------------------------------------------

  def set_attr(self, name: str, value: Any) -> None:
    """Sets an opcode-specific attribute; None removes it. Enum attributes
    also accept their HLO text spelling (e.g. direction="LT")."""
    spec = hlo_attrs.attr_spec(self.opcode, name)
    if spec is None:
      allowed = [s.name for s in hlo_attrs.attr_specs(self.opcode)]
      raise support.InvalidArgumentError(
          f"{self.opcode.value} instruction {self.name} has no attribute "
          f"'{name}' (allowed: {', '.join(allowed) or 'none'})")
    if value is None:
      self.attrs.pop(name, None)
      return
    if spec.kind == AttrKind.ENUM and spec.enum is not None and isinstance(
        value, str):
      parsed = spec.enum.parse(value)
      if parsed is None:
        raise support.InvalidArgumentError(
            f"unknown {name} '{value}' for {self.name}; expected one of "
            f"{', '.join(spec.enum.spellings())}")
      value = parsed
    if spec.kind == AttrKind.INT_LIST:
      value = tuple(int(v) for v in value)
    elif spec.kind in (AttrKind.INT_LIST_LIST, AttrKind.SLICE_RANGES):
      value = tuple(tuple(int(x) for x in v) for v in value)
    elif spec.kind in (AttrKind.PRECISION_LIST, AttrKind.SHAPE_LIST,
                       AttrKind.COMPUTATION_LIST, AttrKind.ALIASING):
      value = tuple(value)
    elif spec.kind == AttrKind.INT:
      value = int(value)
    self.attrs[name] = value
    if self.opcode == HloOpcode.kFusion and name == "calls":
      value.fusion_instruction = self

  def attr(self, name: str) -> Any:
    """The attribute's value, or its schema default when unset."""
    if name in self.attrs:
      return self.attrs[name]
    spec = hlo_attrs.attr_spec(self.opcode, name)
    if spec is None:
      raise support.InvalidArgumentError(
          f"{self.opcode.value} instruction {self.name} has no attribute "
          f"'{name}'")
    return spec.default

  def has_attr(self, name: str) -> bool:
    return name in self.attrs

  def called_computations(self) -> list:
    """Computations this instruction calls, in attribute-schema order."""
    names = hlo_attrs.computation_attr_names(self.opcode)
    if not names:  # most opcodes call nothing
      return []
    result = []
    attrs = self.attrs
    for name in names:
      value = attrs.get(name)
      if value is None:
        continue
      if isinstance(value, tuple):
        result.extend(value)
      else:
        result.append(value)
    return result

  def replace_called_computation(self, old, new) -> None:
    for name in hlo_attrs.computation_attr_names(self.opcode):
      value = self.attrs.get(name)
      if value is old:
        self.set_attr(name, new)
      elif isinstance(value, tuple) and any(v is old for v in value):
        self.set_attr(name, tuple(new if v is old else v for v in value))

  # -- typed accessors ---------------------------------------------------------

  @property
  def dimensions(self) -> tuple[int, ...]:
    return self.attr("dimensions") or ()

  @property
  def to_apply(self):
    return self.attr("to_apply")

  @property
  def fused_computation(self):
    if self.opcode != HloOpcode.kFusion:
      raise support.InvalidArgumentError(f"{self.name} is not a fusion")
    return self.attrs["calls"]

  @property
  def fusion_kind(self) -> FusionKind:
    return self.attr("kind")

  @property
  def while_condition(self):
    return self.attr("condition")

  @property
  def while_body(self):
    return self.attr("body")

  @property
  def branch_computations(self) -> list:
    if self.attrs.get("branch_computations") is not None:
      return list(self.attrs["branch_computations"])
    return [self.attrs["true_computation"], self.attrs["false_computation"]]

  @property
  def tuple_index(self) -> int:
    return self.attr("index")

  @property
  def comparison_direction(self) -> xla_data.ComparisonDirection:
    return self.attr("direction")

  @property
  def slice_starts(self) -> tuple[int, ...]:
    return tuple(r[0] for r in self.attr("slice"))

  @property
  def slice_limits(self) -> tuple[int, ...]:
    return tuple(r[1] for r in self.attr("slice"))

  @property
  def slice_strides(self) -> tuple[int, ...]:
    return tuple(r[2] for r in self.attr("slice"))

  @property
  def window(self) -> xla_data.Window:
    return self.attr("window") or xla_data.Window()

  @property
  def padding_config(self) -> xla_data.PaddingConfig:
    return self.attr("padding")

  @property
  def iota_dimension(self) -> int:
    return self.attr("iota_dimension")

  @property
  def dynamic_slice_sizes(self) -> tuple[int, ...]:
    return tuple(self.attr("dynamic_slice_sizes"))

  @property
  def gather_slice_sizes(self) -> tuple[int, ...]:
    return tuple(self.attr("slice_sizes"))

  @property
  def feature_group_count(self) -> int:
    return self.attr("feature_group_count")

  @property
  def batch_group_count(self) -> int:
    return self.attr("batch_group_count")

  @property
  def comparison_type(self):
    """The compare's `type=` (an xla_data.ComparisonType), or None when
    the element type's default applies."""
    return self.attr("type")

  @property
  def exponent_bits(self) -> int:
    return self.attr("exponent_bits")

  @property
  def mantissa_bits(self) -> int:
    return self.attr("mantissa_bits")

  @property
  def k(self) -> int:
    """The number of elements a top-k keeps."""
    return self.attr("k")

  @property
  def largest(self) -> bool:
    return bool(self.attr("largest"))

  @property
  def convolution_dimension_numbers(
      self) -> xla_data.ConvolutionDimensionNumbers:
    return self.attr("dim_labels")

  @property
  def dot_dimension_numbers(self) -> xla_data.DotDimensionNumbers:
    return xla_data.DotDimensionNumbers(
        lhs_contracting_dimensions=self.attr("lhs_contracting_dims"),
        rhs_contracting_dimensions=self.attr("rhs_contracting_dims"),
        lhs_batch_dimensions=self.attr("lhs_batch_dims"),
        rhs_batch_dimensions=self.attr("rhs_batch_dims"))

  @property
  def gather_dimension_numbers(self) -> xla_data.GatherDimensionNumbers:
    return xla_data.GatherDimensionNumbers(
        offset_dims=self.attr("offset_dims"),
        collapsed_slice_dims=self.attr("collapsed_slice_dims"),
        start_index_map=self.attr("start_index_map"),
        index_vector_dim=self.attr("index_vector_dim"),
        operand_batching_dims=self.attr("operand_batching_dims"),
        start_indices_batching_dims=self.attr("start_indices_batching_dims"))

  @property
  def scatter_dimension_numbers(self) -> xla_data.ScatterDimensionNumbers:
    return xla_data.ScatterDimensionNumbers(
        update_window_dims=self.attr("update_window_dims"),
        inserted_window_dims=self.attr("inserted_window_dims"),
        scatter_dims_to_operand_dims=self.attr(
            "scatter_dims_to_operand_dims"),
        index_vector_dim=self.attr("index_vector_dim"),
        input_batching_dims=self.attr("input_batching_dims"),
        scatter_indices_batching_dims=self.attr(
            "scatter_indices_batching_dims"))

  @property
  def custom_call_target(self) -> str:
    return self.attr("custom_call_target")

  # -- properties --------------------------------------------------------------

  def is_elementwise(self) -> bool:
    return hlo_opcode.is_elementwise(self.opcode)

  def is_root(self) -> bool:
    return self.parent is not None and self.parent.root_instruction is self

  def has_side_effect(self) -> bool:
    """True if removing or duplicating this instruction changes behavior."""
    if hlo_opcode.has_property(self.opcode, hlo_opcode.SIDE_EFFECTING):
      return True
    if self.opcode == HloOpcode.kCustomCall:
      return bool(self.attr("custom_call_has_side_effect"))
    return False

  def to_string(self, options: Optional[hlo_printer.HloPrintOptions] = None
                ) -> str:
    return hlo_printer.instruction_to_string(self, options)

  def __str__(self) -> str:
    return self.to_string()

  def __repr__(self) -> str:
    return f"<HloInstruction {self.name} = {self.shape} {self.opcode.value}>"


# -- creation helpers ----------------------------------------------------------


def create(opcode: HloOpcode, shape: Shape,
           operands: Iterable[HloInstruction] = (), name: Optional[str] = None,
           **attrs) -> HloInstruction:
  """An instruction of any opcode; keyword arguments are its attributes."""
  return HloInstruction(opcode, shape, tuple(operands), attrs, name)


def create_parameter(number: int, shape: Shape,
                     name: Optional[str] = None) -> HloInstruction:
  instr = HloInstruction(HloOpcode.kParameter, shape,
                         name=name or f"param_{number}")
  instr.parameter_number = number
  return instr


def create_constant(literal: Literal,
                    name: Optional[str] = None) -> HloInstruction:
  instr = HloInstruction(HloOpcode.kConstant, literal.shape,
                         name=name or "constant")
  instr.literal = literal
  return instr


def create_unary(shape: Shape, opcode: HloOpcode,
                 operand: HloInstruction) -> HloInstruction:
  return HloInstruction(opcode, shape, (operand,))


def create_binary(shape: Shape, opcode: HloOpcode, lhs: HloInstruction,
                  rhs: HloInstruction) -> HloInstruction:
  return HloInstruction(opcode, shape, (lhs, rhs))


def create_compare(shape: Shape, lhs: HloInstruction, rhs: HloInstruction,
                   direction: xla_data.ComparisonDirection,
                   comparison_type: Optional[xla_data.ComparisonType] = None
                   ) -> HloInstruction:
  return create(HloOpcode.kCompare, shape, (lhs, rhs), direction=direction,
                type=comparison_type)


def create_broadcast(shape: Shape, operand: HloInstruction,
                     dimensions: Sequence[int]) -> HloInstruction:
  return create(HloOpcode.kBroadcast, shape, (operand,),
                dimensions=tuple(dimensions))


def create_reshape(shape: Shape, operand: HloInstruction) -> HloInstruction:
  return create(HloOpcode.kReshape, shape, (operand,))


def create_transpose(shape: Shape, operand: HloInstruction,
                     permutation: Sequence[int]) -> HloInstruction:
  return create(HloOpcode.kTranspose, shape, (operand,),
                dimensions=tuple(permutation))


def create_convert(shape: Shape, operand: HloInstruction) -> HloInstruction:
  return create(HloOpcode.kConvert, shape, (operand,))


def create_slice(shape: Shape, operand: HloInstruction, starts: Sequence[int],
                 limits: Sequence[int],
                 strides: Optional[Sequence[int]] = None) -> HloInstruction:
  strides = strides or (1,) * len(starts)
  return create(HloOpcode.kSlice, shape, (operand,),
                slice=tuple(zip(starts, limits, strides)))


def create_concatenate(shape: Shape, operands: Sequence[HloInstruction],
                       dimension: int) -> HloInstruction:
  return create(HloOpcode.kConcatenate, shape, operands,
                dimensions=(dimension,))


def create_iota(shape: Shape, iota_dimension: int) -> HloInstruction:
  return create(HloOpcode.kIota, shape, iota_dimension=iota_dimension)


def create_tuple(elements: Sequence[HloInstruction]) -> HloInstruction:
  shape = Shape.tuple_of(e.shape for e in elements)
  return create(HloOpcode.kTuple, shape, elements)


def create_get_tuple_element(operand: HloInstruction,
                             index: int) -> HloInstruction:
  if not operand.shape.is_tuple() or not (
      0 <= index < len(operand.shape.tuple_shapes)):
    raise support.InvalidArgumentError(
        f"get-tuple-element index {index} out of range for "
        f"{operand.shape.to_string()}")
  return create(HloOpcode.kGetTupleElement,
                operand.shape.tuple_shapes[index], (operand,), index=index)


def create_dot(shape: Shape, lhs: HloInstruction, rhs: HloInstruction,
               dnums: xla_data.DotDimensionNumbers) -> HloInstruction:
  return create(HloOpcode.kDot, shape, (lhs, rhs),
                lhs_contracting_dims=dnums.lhs_contracting_dimensions,
                rhs_contracting_dims=dnums.rhs_contracting_dimensions,
                lhs_batch_dims=dnums.lhs_batch_dimensions or None,
                rhs_batch_dims=dnums.rhs_batch_dimensions or None)


def create_reduce(shape: Shape, operands: Sequence[HloInstruction],
                  init_values: Sequence[HloInstruction],
                  dimensions: Sequence[int], to_apply) -> HloInstruction:
  return create(HloOpcode.kReduce, shape, tuple(operands) + tuple(init_values),
                dimensions=tuple(dimensions), to_apply=to_apply)


def create_call(shape: Shape, operands: Sequence[HloInstruction],
                computation) -> HloInstruction:
  return create(HloOpcode.kCall, shape, operands, to_apply=computation)


def create_while(shape: Shape, condition, body,
                 init: HloInstruction) -> HloInstruction:
  return create(HloOpcode.kWhile, shape, (init,), condition=condition,
                body=body)


def create_conditional(shape: Shape, branch_index: HloInstruction,
                       branch_computations: Sequence,
                       branch_operands: Sequence[HloInstruction]
                       ) -> HloInstruction:
  return create(HloOpcode.kConditional, shape,
                (branch_index,) + tuple(branch_operands),
                branch_computations=tuple(branch_computations))


def create_fusion(shape: Shape, kind: FusionKind,
                  operands: Sequence[HloInstruction],
                  fused_computation) -> HloInstruction:
  return create(HloOpcode.kFusion, shape, operands, kind=kind,
                calls=fused_computation)


def create_custom_call(shape: Shape, operands: Sequence[HloInstruction],
                       target: str, **attrs) -> HloInstruction:
  return create(HloOpcode.kCustomCall, shape, operands,
                custom_call_target=target, **attrs)
