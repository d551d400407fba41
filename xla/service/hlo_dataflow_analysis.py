"""Logical values and buffers of an HLO module (modelled on XLA's
xla/service/hlo_dataflow_analysis.h and hlo_alias_analysis.h).

A *position* is (instruction, shape index): one array or tuple-table slot of
an instruction's output. A *value* (`HloValue`) is defined at exactly one
position and may appear at many: ops that only route data forward the values
of their operands instead of defining new ones:

  get-tuple-element  output{i..} = operand{k,i..}
  tuple              output{k,i..} = operand_k{i..}; defines only output{}
  bitcast, add-dependency (operand 0), domain, opt-barrier
                     output = operand

Every other instruction defines a fresh value at every index of its shape.

A *buffer* (`HloBuffer`) is a set of values that must share storage (XLA's
alias analysis). Values are joined when control flow requires it:

  while        output, body parameter, condition parameter and body root,
               per index (the loop carry is updated in place)
  conditional  output with each branch root; branch k's parameter with
               operand k+1
  call         output with the callee root; callee parameters with operands

The while *init* operand is deliberately not joined: buffer assignment may
move it into the carry in place when it dies at the loop (see
buffer_assignment.py), otherwise the carry gets its own buffer (a copy).

Only the entry computation and computations reached from it through
while / conditional / call are analysed ("control-flow computations");
computations applied element by element (fusion bodies, reduce / sort /
scatter appliers) allocate no buffers of their own.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

import support
from xla import shape_util
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_module import HloModule
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.shape import Shape

ShapeIndex = tuple[int, ...]

# Ops whose output is exactly (all of) operand 0's values.
_FORWARD_OPERAND0 = frozenset({
    HloOpcode.kBitcast, HloOpcode.kAddDependency, HloOpcode.kDomain,
    HloOpcode.kOptimizationBarrier,
})
# Ops that forward values without reading them (their uses are not uses).
FORWARDING_OPCODES = _FORWARD_OPERAND0 | {
    HloOpcode.kGetTupleElement, HloOpcode.kTuple,
}

POINTER_SIZE = 8


def buffer_size(shape: Shape) -> int:
  """Bytes of one position's storage: arrays dense, tuples a pointer each."""
  if shape.is_token() or shape.is_opaque():
    return 0
  return shape_util.byte_size_of(shape, POINTER_SIZE)


@dataclasses.dataclass(frozen=True)
class HloPosition:
  instruction: HloInstruction
  index: ShapeIndex

  def __str__(self) -> str:
    idx = ",".join(map(str, self.index))
    return f"{self.instruction.name}{{{idx}}}"


class HloValue:
  """One logical value: where it is defined and every position holding it."""

  def __init__(self, value_id: int, instruction: HloInstruction,
               index: ShapeIndex):
    self.id = value_id
    self.defining_instruction = instruction
    self.defining_index = index
    self.shape = shape_util.get_subshape(instruction.shape, index)
    self.size = buffer_size(self.shape)
    self.positions: list[HloPosition] = []

  @property
  def defining_position(self) -> HloPosition:
    return HloPosition(self.defining_instruction, self.defining_index)

  def __repr__(self) -> str:
    return f"<HloValue {self.id} {self.defining_position}>"


class HloBuffer:
  """Values that must live in one piece of storage."""

  def __init__(self, buffer_id: int, values: list[HloValue]):
    self.id = buffer_id
    self.values = sorted(values, key=lambda v: v.id)
    self.size = max((v.size for v in values), default=0)

  def positions(self) -> Iterator[HloPosition]:
    for v in self.values:
      yield from v.positions

  def __repr__(self) -> str:
    return (f"<HloBuffer {self.id} size={self.size} "
            f"values={[str(v.defining_position) for v in self.values]}>")


def control_flow_callees(instr: HloInstruction) -> list[HloComputation]:
  """Computations that `instr` runs as part of the program's control flow,
  in execution order (condition before body)."""
  op = instr.opcode
  if op == HloOpcode.kWhile:
    return [instr.while_condition, instr.while_body]
  if op == HloOpcode.kConditional:
    return instr.branch_computations
  if op == HloOpcode.kCall:
    return [instr.to_apply]
  return []


def control_flow_computations(module: HloModule) -> list[HloComputation]:
  """The entry and every computation reached through control flow, callers
  first. A computation called from two sites is rejected (XLA flattens the
  call graph first so each has one caller)."""
  entry = module.entry_computation
  if entry is None:
    raise support.FailedPreconditionError(
        f"module {module.name} has no entry computation")
  order: list[HloComputation] = []
  caller: dict[int, HloInstruction] = {}
  stack = [entry]
  while stack:
    comp = stack.pop()
    order.append(comp)
    for instr in comp.instructions:
      for callee in control_flow_callees(instr):
        if id(callee) in caller:
          if caller[id(callee)] is not instr or instr.opcode != (
              HloOpcode.kConditional):
            raise support.UnimplementedError(
                f"computation {callee.name} is called from more than one "
                f"control-flow site ({caller[id(callee)].name}, "
                f"{instr.name}); flatten the call graph first")
          raise support.UnimplementedError(
              f"conditional {instr.name} uses computation {callee.name} for "
              f"more than one branch; flatten the call graph first")
        caller[id(callee)] = instr
        stack.append(callee)
  return order


class _UnionFind:

  def __init__(self):
    self.parent: dict[int, int] = {}

  def find(self, x: int) -> int:
    self.parent.setdefault(x, x)
    root = x
    while self.parent[root] != root:
      root = self.parent[root]
    while self.parent[x] != root:
      self.parent[x], x = root, self.parent[x]
    return root

  def union(self, a: int, b: int) -> None:
    ra, rb = self.find(a), self.find(b)
    if ra != rb:
      self.parent[max(ra, rb)] = min(ra, rb)


class HloDataflowAnalysis:
  """Values, positions and must-alias buffers of a module; see the module
  docstring. Build with `HloDataflowAnalysis.run(module)`."""

  def __init__(self, module: HloModule):
    self.module = module
    self.computations = control_flow_computations(module)
    self.values: list[HloValue] = []
    # id(instruction) -> {index: HloValue}
    self._value_map: dict[int, dict[ShapeIndex, HloValue]] = {}
    self._uf = _UnionFind()
    self.buffers: list[HloBuffer] = []
    self._buffer_of_value: dict[int, HloBuffer] = {}

  @classmethod
  def run(cls, module: HloModule) -> "HloDataflowAnalysis":
    analysis = cls(module)
    for comp in analysis.computations:
      for instr in comp.make_instruction_post_order():
        analysis._define_or_forward(instr)
    for comp in analysis.computations:
      for instr in comp.instructions:
        analysis._join_control_flow(instr)
    analysis._build_buffers()
    return analysis

  # -- values ------------------------------------------------------------------

  def _new_value(self, instr: HloInstruction, index: ShapeIndex) -> HloValue:
    value = HloValue(len(self.values), instr, index)
    self.values.append(value)
    return value

  def _define_or_forward(self, instr: HloInstruction) -> None:
    op = instr.opcode
    vmap: dict[ShapeIndex, HloValue] = {}
    if op == HloOpcode.kGetTupleElement:
      src = self._value_map[id(instr.operand(0))]
      k = instr.tuple_index
      for index, _ in shape_util.subshapes(instr.shape):
        vmap[index] = src[(k,) + index]
    elif op == HloOpcode.kTuple:
      vmap[()] = self._new_value(instr, ())
      for k, operand in enumerate(instr.operands):
        for index, value in self._value_map[id(operand)].items():
          vmap[(k,) + index] = value
    elif op in _FORWARD_OPERAND0:
      vmap = dict(self._value_map[id(instr.operand(0))])
    else:
      for index, _ in shape_util.subshapes(instr.shape):
        vmap[index] = self._new_value(instr, index)
    for index, value in vmap.items():
      value.positions.append(HloPosition(instr, index))
    self._value_map[id(instr)] = vmap

  def value_at(self, instr: HloInstruction,
               index: ShapeIndex = ()) -> HloValue:
    """The value at a position."""
    try:
      return self._value_map[id(instr)][tuple(index)]
    except KeyError:
      raise support.NotFoundError(
          f"no value at {instr.name}{{{','.join(map(str, index))}}} (not in "
          f"a control-flow computation, or a bad index)") from None

  def values_defined_by(self, instr: HloInstruction) -> list[HloValue]:
    return [v for i, v in self._value_map[id(instr)].items()
            if v.defining_instruction is instr and v.defining_index == i]

  def defines_value(self, instr: HloInstruction,
                    index: ShapeIndex = ()) -> bool:
    v = self.value_at(instr, index)
    return v.defining_instruction is instr and v.defining_index == tuple(index)

  # -- must-alias joins ----------------------------------------------------------

  def _join_all(self, a: HloInstruction, b: HloInstruction) -> None:
    amap, bmap = self._value_map[id(a)], self._value_map[id(b)]
    for index, value in amap.items():
      self._uf.union(value.id, bmap[index].id)

  def _join_control_flow(self, instr: HloInstruction) -> None:
    op = instr.opcode
    if op == HloOpcode.kWhile:
      body, cond = instr.while_body, instr.while_condition
      self._join_all(instr, body.parameter_instruction(0))
      self._join_all(instr, cond.parameter_instruction(0))
      self._join_all(instr, body.root_instruction)
    elif op == HloOpcode.kConditional:
      for k, branch in enumerate(instr.branch_computations):
        self._join_all(instr, branch.root_instruction)
        self._join_all(instr.operand(k + 1), branch.parameter_instruction(0))
    elif op == HloOpcode.kCall:
      callee = instr.to_apply
      self._join_all(instr, callee.root_instruction)
      for k, operand in enumerate(instr.operands):
        self._join_all(operand, callee.parameter_instruction(k))

  def _build_buffers(self) -> None:
    groups: dict[int, list[HloValue]] = {}
    for value in self.values:
      groups.setdefault(self._uf.find(value.id), []).append(value)
    for root in sorted(groups):
      buf = HloBuffer(len(self.buffers), groups[root])
      self.buffers.append(buf)
      for v in buf.values:
        self._buffer_of_value[v.id] = buf
    self._check_no_interference()

  def _check_no_interference(self) -> None:
    """Two distinct values at two indices of one output must not share a
    buffer (XLA needs copy insertion for that, e.g. a loop that swaps its
    carry elements)."""
    for comp in self.computations:
      for instr in comp.instructions:
        seen: dict[int, HloValue] = {}
        for index, value in self._value_map[id(instr)].items():
          buf = self._buffer_of_value[value.id]
          other = seen.setdefault(buf.id, value)
          if other is not value:
            raise support.FailedPreconditionError(
                f"values {other.defining_position} and "
                f"{value.defining_position} both reach {instr.name} and must "
                f"share one buffer; run copy insertion first")

  def buffer_of(self, value: HloValue) -> HloBuffer:
    return self._buffer_of_value[value.id]

  def buffer_at(self, instr: HloInstruction,
                index: ShapeIndex = ()) -> HloBuffer:
    return self.buffer_of(self.value_at(instr, index))

  def must_alias(self, a: HloInstruction, a_index: ShapeIndex,
                 b: HloInstruction, b_index: ShapeIndex) -> bool:
    return self.buffer_at(a, a_index) is self.buffer_at(b, b_index)

  def uses(self, value: HloValue) -> list[HloInstruction]:
    """Instructions that read `value` (forwarding ops are not reads; their
    own positions carry the value on), plus callers reading a callee root."""
    result: list[HloInstruction] = []
    for pos in value.positions:
      for user in pos.instruction.users:
        if user.opcode in FORWARDING_OPCODES:
          continue
        if user not in result:
          result.append(user)
    return result

  def is_live_out(self, value: HloValue) -> bool:
    """Whether `value` reaches the entry computation's root."""
    root = self.module.entry_computation.root_instruction
    return any(p.instruction is root for p in value.positions)

  def entry_parameter_value(self, value: HloValue) -> Optional[int]:
    instr = value.defining_instruction
    if (instr.opcode == HloOpcode.kParameter
        and instr.parent is self.module.entry_computation):
      return instr.parameter_number
    return None
