"""Layout assignment (xla/service/layout_assignment.h), simplified.

Gives every instruction of every computation a shape with layouts, then
makes the constraints hold by inserting `copy` instructions (a copy to a
different layout is XLA's physical transpose):

  * entry parameters take the layouts of the entry computation layout
    (`module.config.entry_computation_layout`, or the one passed to the
    pass; missing layouts there mean the default), and the entry root is
    copied to the result layout it asks for, leaf by leaf for tuples;
  * elementwise instructions take the layout of their first operand of the
    result's dimensions (so layouts flow from parameters through elementwise
    chains without copies); other operands of those dimensions are copied to
    it when they differ;
  * `tuple` and `get-tuple-element` take their operand's layouts;
  * everything else - dot and convolution (row-major operands), reshape,
    transpose, reduce, broadcast, slice, gather, ..., and the operands and
    results of while/call/conditional/fusion/custom-call - uses the default
    descending layout {rank-1,...,0} for its result and needs it on its
    array operands; operands with another layout are copied;
  * non-entry computations use default layouts for their parameters and
    root (the root is copied when needed), matching their callers.

Layouts already written on non-entry-parameter instructions are replaced by
these rules (a `copy` becomes an ordinary default-layout instruction, which
a later pass may remove). Afterwards the module's entry computation layout
is set to the layouts used.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from xla import shape_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.shape import ProgramShape
from xla.shape import Shape


def _default(shape: Shape) -> Shape:
  return shape_util.with_default_layouts(shape, replace=True)


def _fill(shape: Shape) -> Shape:
  return shape_util.with_default_layouts(shape, replace=False)


def convert_layout(comp, instr, target: Shape):
  """`instr` if its shape already has `target`'s layouts, else a copy (per
  leaf for tuples) with them, added to `comp`."""
  if instr.shape == target:
    return instr
  if target.is_tuple():
    elems = []
    for k, sub in enumerate(target.tuple_shapes):
      g = comp.add_instruction(hi.create_get_tuple_element(instr, k))
      elems.append(convert_layout(comp, g, sub))
    return comp.add_instruction(hi.create_tuple(elems))
  if not target.is_array():
    return instr
  copy = hi.create(HloOpcode.kCopy, target, (instr,))
  copy.metadata = instr.metadata
  return comp.add_instruction(copy)


class LayoutAssignment(hpi.HloModulePass):
  """See the module docstring."""

  def __init__(self, entry_computation_layout: Optional[ProgramShape] = None):
    self.entry_computation_layout = entry_computation_layout
    self.copies_added = 0

  @property
  def name(self) -> str:
    return "layout-assignment"

  def _require(self, comp, user, index, target) -> bool:
    op = user.operand(index)
    new = convert_layout(comp, op, target)
    if new is op:
      return False
    user.replace_operand_with(index, new)
    self.copies_added += 1
    return True

  def _assign(self, comp, instr) -> bool:
    """Sets `instr`'s layouts and fixes its operands; True if changed."""
    op = instr.opcode
    changed = False
    if op == HloOpcode.kTuple:
      new_shape = Shape.tuple_of(o.shape for o in instr.operands)
    elif op == HloOpcode.kGetTupleElement:
      new_shape = instr.operand(0).shape.tuple_shapes[instr.tuple_index]
    elif (instr.is_elementwise() and instr.shape.is_array() and
          not instr.called_computations()):
      dims = instr.shape.dimensions
      leader = next((o for o in instr.operands
                     if o.shape.is_array() and o.shape.dimensions == dims),
                    None)
      layout = (shape_util.layout_or_default(leader.shape) if leader else
                shape_util.layout_or_default(_default(instr.shape)))
      new_shape = instr.shape.with_layout(layout)
      for i, o in enumerate(instr.operands):
        if o.shape.is_array() and o.shape.dimensions == dims:
          changed |= self._require(comp, instr, i,
                                   o.shape.with_layout(layout))
    else:
      new_shape = _default(instr.shape)
      for i, o in enumerate(instr.operands):
        changed |= self._require(comp, instr, i, _default(o.shape))
    if new_shape != instr.shape:
      instr.shape = new_shape
      changed = True
    return changed

  def _entry_layout(self, module) -> ProgramShape:
    ecl = (self.entry_computation_layout or
           module.config.entry_computation_layout)
    entry = module.entry_computation
    if ecl is None:
      ps = entry.program_shape()
      return ProgramShape(tuple(_default(p) for p in ps.parameters),
                          _default(ps.result), ps.parameter_names)
    return ProgramShape(tuple(_fill(p) for p in ecl.parameters),
                        _fill(ecl.result), ecl.parameter_names)

  def run_on_computation(self, comp, param_shapes=None,
                         result_shape=None) -> bool:
    changed = False
    for p in comp.parameter_instructions:
      want = (param_shapes[p.parameter_number] if param_shapes is not None
              else _default(p.shape))
      if p.shape != want:
        p.shape = want
        changed = True
    # The post order reaches every instruction, dead ones included.
    for instr in comp.make_instruction_post_order():
      if instr.opcode == HloOpcode.kParameter:
        continue
      changed |= self._assign(comp, instr)
    want = result_shape or _default(comp.root_instruction.shape)
    root = comp.root_instruction
    new_root = convert_layout(comp, root, want)
    if new_root is not root:
      comp.set_root_instruction(new_root)
      self.copies_added += 1
      changed = True
    return changed

  def run(self, module, execution_threads=frozenset()) -> bool:
    self.copies_added = 0
    ecl = self._entry_layout(module)
    changed = False
    for comp in hpi.computations_to_run(module, execution_threads):
      if comp is module.entry_computation:
        changed |= self.run_on_computation(comp, ecl.parameters, ecl.result)
      else:
        changed |= self.run_on_computation(comp)
    if module.config.entry_computation_layout != ecl:
      module.config = dataclasses.replace(module.config,
                                          entry_computation_layout=ecl)
      changed = True
    return changed
