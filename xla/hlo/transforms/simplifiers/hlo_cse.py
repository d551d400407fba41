"""Common subexpression elimination (xla/hlo/transforms/simplifiers/hlo_cse.h).

Within each computation, an instruction identical to an earlier one is
replaced by it. Identical means: same opcode, same operands (the same
instruction objects, after earlier merges), same shape (with the layout
when `is_layout_sensitive`, else `ShapeUtil::Compatible`), equal
opcode-specific attributes (called computations by identity) and equal
sharding, backend_config and frontend attributes. Constants are identical
when their literals are bitwise equal (so 0.0 and -0.0 stay apart, and a
NaN matches only the same NaN bits).

Never merged: parameters; instructions with a side effect, also through
the computations they call (merging two outfeeds or two `rng`s would drop
one); instructions with control dependencies (the order they pin would be
lost).

With `canonicalize_commutative=True` the operands of a COMMUTATIVE opcode
(opcode table) are compared as a multiset, so add(a, b) merges with
add(b, a). XLA's CSE does not do this; it is off by default.

Operands are visited before users (post order), so chains of identical
instructions collapse in a single run.
"""

from __future__ import annotations

from xla import shape_util
from xla.hlo.ir import hlo_opcode
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.transforms.simplifiers import hlo_dce


class HloCSE(hpi.HloComputationPass):
  """See the module docstring."""

  skip_fusion_computations = False

  def __init__(self, is_layout_sensitive: bool = False,
               canonicalize_commutative: bool = False):
    self.is_layout_sensitive = is_layout_sensitive
    self.canonicalize_commutative = canonicalize_commutative

  @property
  def name(self) -> str:
    return "cse"

  # -- identity ----------------------------------------------------------------

  def _operand_key(self, instr) -> tuple[int, ...]:
    ids = tuple(id(o) for o in instr.operands)
    if self.canonicalize_commutative and hlo_opcode.is_binary_commutative(
        instr.opcode):
      ids = tuple(sorted(ids))
    return ids

  def _shape_key(self, instr):
    shape = instr.shape
    return shape if self.is_layout_sensitive else shape.without_layout()

  def _key(self, instr):
    """A hashable summary; equal keys are then compared in full."""
    literal = None
    if instr.opcode == HloOpcode.kConstant:
      literal = hash(instr.literal)
    return (instr.opcode, self._shape_key(instr), self._operand_key(instr),
            literal)

  def _same_shape(self, a, b) -> bool:
    if self.is_layout_sensitive:
      return a.shape == b.shape
    return shape_util.compatible(a.shape, b.shape)

  def identical(self, a, b) -> bool:
    """True if `b` may be replaced by `a`."""
    return (a.opcode == b.opcode and self._same_shape(a, b) and
            self._operand_key(a) == self._operand_key(b) and
            _attrs_equal(a.attrs, b.attrs) and a.literal == b.literal and
            a.parameter_number == b.parameter_number and
            a.sharding == b.sharding and
            a.backend_config == b.backend_config and
            a.frontend_attributes == b.frontend_attributes)

  @staticmethod
  def _candidate(instr, side_effects) -> bool:
    return (instr.opcode != HloOpcode.kParameter and
            not instr.control_predecessors and
            not instr.control_successors and
            not side_effects.instruction(instr))

  # -- running -----------------------------------------------------------------

  def run_on_computation(self, comp, side_effects=None) -> bool:
    side_effects = side_effects or hlo_dce.SideEffectCache()
    seen: dict[object, list] = {}
    changed = False
    for instr in comp.make_instruction_post_order():
      if not self._candidate(instr, side_effects):
        continue
      bucket = seen.setdefault(self._key(instr), [])
      match = next((e for e in bucket if self.identical(e, instr)), None)
      if match is None:
        bucket.append(instr)
        continue
      instr.replace_all_uses_with(match)
      comp.remove_instruction(instr)
      changed = True
    return changed

  def module_context(self, module):
    return hlo_dce.SideEffectCache()


def _attrs_equal(a: dict, b: dict) -> bool:
  """Attribute dicts equal; computations compare by identity."""
  if a.keys() != b.keys():
    return False
  for key, va in a.items():
    vb = b[key]
    if isinstance(va, tuple) and isinstance(vb, tuple):
      if len(va) != len(vb) or not all(
          x is y or (not _is_computation(x) and x == y)
          for x, y in zip(va, vb)):
        return False
    elif _is_computation(va) or _is_computation(vb):
      if va is not vb:
        return False
    elif va != vb:
      return False
  return True


def _is_computation(value) -> bool:
  return hasattr(value, "make_instruction_post_order")
