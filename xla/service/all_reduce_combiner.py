"""Combines independent all-reduces into one variadic all-reduce (after
XLA's AllReduceCombiner).

    a = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add
    b = f32[8] all-reduce(y), replica_groups={{0,1}}, to_apply=add
  ->
    ab = (f32[4], f32[8]) all-reduce(x, y), replica_groups={{0,1}},
         to_apply=add
    a = get-tuple-element(ab), index=0
    b = get-tuple-element(ab), index=1

Every collective pays a rendezvous of its participants whatever its size,
so the gradients that an SPMD program sums after its loop (one all-reduce
per parameter) are summed in one. All-reduces combine when they are in
the same computation and agree on everything but their operands: the
reduction (the same binary op, or the same computation), the element type
(the runtime reduces one element type per collective), the replica groups,
whether they have a channel id, use_global_device_ids, constrain_layout and
mode; and when neither depends on the other (else the combined one would
have to run before and after itself). Groups are formed greedily in post
order up to `threshold_bytes` and `threshold_count` operands; a combined
all-reduce takes the first member's channel id and metadata. All-reduces
with control dependencies, a sharding or a tuple result are left alone.

Independence is decided on the graph as it is when a group is formed: after
each combination the dependencies are computed again, since two groups
that are each independent inside can depend on each other once combined.
"""

from __future__ import annotations

from typing import Optional

from xla import shape_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.service import collective_ops_utils as cou

O = HloOpcode

# XLA's default for its GPU and CPU combiners' byte threshold.
DEFAULT_THRESHOLD_BYTES = 30 * 1024 * 1024
DEFAULT_THRESHOLD_COUNT = 256

# The reductions one scalar op computes: all-reduces applying different
# computations of the same op combine.
_BINARY = frozenset({O.kAdd, O.kMultiply, O.kMinimum, O.kMaximum, O.kAnd,
                     O.kOr, O.kXor})


def _reduction_key(comp) -> object:
  """The binary op `comp` applies to its two scalar parameters, or the
  computation itself where it is anything else."""
  params = comp.parameter_instructions
  root = comp.root_instruction
  if (len(params) == 2 and root.opcode in _BINARY and
      all(p.shape.is_array() and not p.shape.dimensions for p in params) and
      {id(o) for o in root.operands} == {id(p) for p in params}):
    return root.opcode
  return ("computation", id(comp))


def _key(instr) -> Optional[tuple]:
  """What all-reduces must share to combine, or None if `instr` is not
  one that combines."""
  if (instr.opcode != O.kAllReduce or instr.operand_count != 1 or
      not instr.shape.is_array() or instr.control_predecessors or
      instr.control_successors or instr.sharding is not None):
    return None
  groups = tuple(tuple(g) for g in cou.replica_groups(instr))
  return (_reduction_key(instr.to_apply), instr.shape.element_type, groups,
          instr.attr("channel_id") is not None,
          bool(instr.attr("use_global_device_ids")),
          bool(instr.attr("constrain_layout")), instr.attr("mode"))


def _ancestors(order, candidates) -> dict[int, int]:
  """id(instr) -> a bit set (a Python int) of the candidates (bit i for
  candidates[i]) it depends on through operands or control edges."""
  bit = {id(c): 1 << i for i, c in enumerate(candidates)}
  deps: dict[int, int] = {}
  for instr in order:
    mask = 0
    for op in list(instr.operands) + list(instr.control_predecessors):
      mask |= deps[id(op)] | bit.get(id(op), 0)
    deps[id(instr)] = mask
  return deps


class AllReduceCombiner(hpi.HloModulePass):
  """See the module docstring."""

  def __init__(self, threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
               threshold_count: int = DEFAULT_THRESHOLD_COUNT):
    self.threshold_bytes = int(threshold_bytes)
    self.threshold_count = int(threshold_count)

  @property
  def name(self) -> str:
    return "all-reduce-combiner"

  def run(self, module, execution_threads=frozenset()) -> bool:
    if self.threshold_bytes <= 0 or self.threshold_count <= 1:
      return False
    changed = False
    for comp in list(module.computations):
      if comp.is_fusion_computation():
        continue
      while self._combine_one_group(comp):
        changed = True
    return changed

  def _group(self, comp) -> list:
    """The first group (in post order) of two or more all-reduces that may
    combine, or []."""
    order = comp.make_instruction_post_order()
    candidates, keys = [], []
    for instr in order:
      key = _key(instr)
      if key is not None:
        candidates.append(instr)
        keys.append(key)
    if len(candidates) < 2:
      return []
    deps = _ancestors(order, candidates)
    # key -> (members, their bit set, bytes); post order means a later
    # candidate can only depend on earlier ones, so one check suffices.
    open_groups: dict[tuple, tuple[list, int, int]] = {}
    for i, (instr, key) in enumerate(zip(candidates, keys)):
      size = shape_util.byte_size_of(instr.shape)
      members, bits, total = open_groups.get(key, ([], 0, 0))
      if members and (deps[id(instr)] & bits or
                      total + size > self.threshold_bytes or
                      len(members) >= self.threshold_count):
        if len(members) > 1:
          return members
        members, bits, total = [], 0, 0
      open_groups[key] = (members + [instr], bits | (1 << i), total + size)
    for members, _, _ in open_groups.values():
      if len(members) > 1:
        return members
    return []

  def _combine_one_group(self, comp) -> bool:
    members = self._group(comp)
    if not members:
      return False
    first = members[0]
    operands = [m.operand(0) for m in members]
    shape = shape_util.make_tuple_shape([m.shape for m in members])
    attrs = {k: v for k, v in first.attrs.items()}
    combined = hi.HloInstruction(O.kAllReduce, shape, operands, attrs=attrs,
                                 name=first.name)
    combined.metadata = first.metadata
    combined.frontend_attributes = dict(first.frontend_attributes)
    comp.add_instruction(combined)
    for i, member in enumerate(members):
      element = comp.add_instruction(
          hi.create_get_tuple_element(combined, i))
      element.metadata = member.metadata
      member.replace_all_uses_with(element)
      comp.remove_instruction(member)
    return True
