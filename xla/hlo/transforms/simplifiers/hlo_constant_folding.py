"""Constant folding (xla/hlo/transforms/simplifiers/hlo_constant_folding.h).

Replaces an instruction whose operands are all constants by a constant
holding its value, computed with the HLO evaluator
(`hlo_evaluator.evaluate_constant_expression`). Instructions are visited
operands first, so chains of constant expressions fold in one run.

Not folded, as in XLA:
  * constants, parameters, instructions without operands (iota, rng, ...:
    a cheap generator is better than a large literal);
  * a broadcast of a constant (it would only grow the constant);
  * side-effecting instructions and those calling side-effecting
    computations; while loops, custom calls, collectives (the evaluator
    declines them);
  * tuple- or token-shaped results;
  * results of more than `max_elements` elements when they are larger than
    all the constant operands together (folding would bloat the module);
  * anything the evaluator cannot compute (it returns None).

Fusion computations are skipped.
"""

from __future__ import annotations

from xla import shape_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.transforms.simplifiers import hlo_dce

_DEFAULT_MAX_ELEMENTS = 45 * 1000 * 1000


class HloConstantFolding(hpi.HloComputationPass):
  """See the module docstring."""

  def __init__(self, max_elements: int = _DEFAULT_MAX_ELEMENTS):
    self.max_elements = max_elements

  @property
  def name(self) -> str:
    return "constant_folding"

  def _foldable(self, instr, side) -> bool:
    if instr.opcode in (HloOpcode.kConstant, HloOpcode.kParameter):
      return False
    if not instr.operands or not instr.shape.is_array():
      return False
    if not all(o.opcode == HloOpcode.kConstant for o in instr.operands):
      return False
    if instr.opcode == HloOpcode.kBroadcast:
      return False
    if side.instruction(instr):
      return False
    out = shape_util.element_count(instr.shape)
    if out > self.max_elements and out > sum(
        shape_util.element_count(o.shape) for o in instr.operands
        if o.shape.is_array()):
      return False
    return True

  def run_on_computation(self, comp, side=None) -> bool:
    side = side or hlo_dce.SideEffectCache()
    changed = False
    for instr in comp.make_instruction_post_order():
      if instr.parent is not comp or not self._foldable(instr, side):
        continue
      # Imported on first use: most modules have nothing to fold, and the
      # evaluator is a large import for a process's first compile.
      from xla.hlo.evaluator import hlo_evaluator  # pylint: disable=g-import-not-at-top
      literal = hlo_evaluator.evaluate_constant_expression(instr)
      if literal is None or not shape_util.compatible(literal.shape,
                                                      instr.shape):
        continue
      const = hi.create_constant(literal)
      const.metadata = instr.metadata
      if instr.shape.layout is not None:
        const.shape = const.shape.with_layout(instr.shape.layout)
      comp.add_instruction(const)
      comp.replace_instruction(instr, const)
      changed = True
    return changed

  def module_context(self, module):
    return hlo_dce.SideEffectCache()
