"""Algebraic simplification
(xla/hlo/transforms/simplifiers/algebraic_simplifier.h), a first set of
rules. The identity/absorbing-element rules (the first four lines below),
negate(negate(x)), and the convert and concatenate rules are pattern rules
(xla.hlo.ir.hlo_pattern) in `_ELEMENT_RULES`; each other rule is a handler
registered for one opcode in `_HANDLERS`. Either returns the instruction
that replaces the one visited, or None.

  add(x, 0), add(0, x), subtract(x, 0)   -> x
  multiply(x, 1), multiply(1, x)         -> x
  multiply(x, 0), multiply(0, x)         -> the zero operand, integers and
                                            pred only (for floats x*0 is NaN
                                            for inf/NaN x and -0 for x < 0)
  negate(negate(x))                      -> x
  reshape(x) to x's own shape            -> x
  reshape(reshape(x))                    -> reshape(x)
  transpose(x) with the identity perm    -> x
  transpose(transpose(x, p1), p2)        -> transpose(x, p1∘p2) (or x)
  transpose(dot(a, b)), rank 2, no batch -> dot(b, a) (the dot's only
                                            user; XLA has the same rule)
  broadcast(x) that adds no dimension    -> x
  broadcast(broadcast(x))                -> broadcast(x)
  slice(x) covering all of x, stride 1   -> x
  convert(x) to x's own element type     -> x
  concatenate(x)                         -> x

"0" and "1" are constants whose elements all have that value, or a
broadcast of such a constant (the usual form of a splat scalar in HLO).
Like XLA, add(x, 0.0) folds to x for floats too, although -0.0 + 0.0 is
+0.0.

A replacement must have a shape compatible with the replaced instruction
(`ShapeUtil::Compatible`; equal, layout included, when
`is_layout_sensitive`). The replaced instruction and operands it leaves
unused are removed. Instructions are visited operands first, so chains
(neg(neg(neg(neg x)))) fold in one run; wrap the pass in HloPassFix to
reach a fixed point.
"""

from __future__ import annotations

from typing import Callable

from xla import primitive_util
from xla import shape_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir import hlo_pattern as m
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.xla_data import PrimitiveType

# -- matchers ------------------------------------------------------------------

# The splat predicates live with the pattern matcher; kept here by name for
# callers of this module.
splat_value = m.splat_value
is_all = m.is_all


def _is_integral_or_pred(instr) -> bool:
  et = instr.shape.element_type
  return (primitive_util.is_integral(et) or
          et == PrimitiveType.PRED)


def _same_element_type(instr) -> bool:
  return instr.operand(0).shape.element_type == instr.shape.element_type


def _x_if_compatible(captures, instr, s):
  """The captured `x`, if its shape may stand for `instr`'s."""
  x = captures["x"]
  return x if s.compatible(x.shape, instr.shape) else None


# -- rewrite rules, as data ----------------------------------------------------
# Rules for one opcode are tried in the order listed; the first match wins.

_X = m.any("x")

_ELEMENT_RULES = m.PatternMatcher([
    # add(x, 0), add(0, x) -> x
    m.Rule(m.op(HloOpcode.kAdd, _X, m.constant_splat(0)), "x"),
    m.Rule(m.op(HloOpcode.kAdd, m.constant_splat(0), _X), "x"),
    # subtract(x, 0) -> x
    m.Rule(m.op(HloOpcode.kSubtract, _X, m.constant_splat(0)), "x"),
    # multiply(x, 1), multiply(1, x) -> x
    m.Rule(m.op(HloOpcode.kMultiply, _X, m.constant_splat(1)), "x"),
    m.Rule(m.op(HloOpcode.kMultiply, m.constant_splat(1), _X), "x"),
    # multiply(x, 0), multiply(0, x) -> 0, integers and pred only
    m.Rule(m.op(HloOpcode.kMultiply, m.any(), m.constant_splat(0, "zero"),
                where=_is_integral_or_pred), "zero"),
    m.Rule(m.op(HloOpcode.kMultiply, m.constant_splat(0, "zero"), m.any(),
                where=_is_integral_or_pred), "zero"),
    # negate(negate(x)) -> x
    m.Rule(m.op(HloOpcode.kNegate, m.op(HloOpcode.kNegate, _X)), "x"),
    # convert(x) to x's own element type -> x
    m.Rule(m.op(HloOpcode.kConvert, _X, where=_same_element_type),
           _x_if_compatible),
    # concatenate(x) -> x
    m.Rule(m.op(HloOpcode.kConcatenate, _X), _x_if_compatible),
])


# -- handlers ------------------------------------------------------------------
# Each takes (instr, simplifier) and returns a replacement or None. New
# instructions are added to instr's computation by the handler.


def _reshape(instr, s):
  op = instr.operand(0)
  if s.compatible(op.shape, instr.shape):
    return op
  if op.opcode == HloOpcode.kReshape:
    inner = op.operand(0)
    if s.compatible(inner.shape, instr.shape):
      return inner
    return s.add(instr, hi.create_reshape(instr.shape, inner))
  return None


def _is_identity(perm) -> bool:
  return tuple(perm) == tuple(range(len(perm)))


def _transpose(instr, s):
  op = instr.operand(0)
  if _is_identity(instr.dimensions) and s.compatible(op.shape, instr.shape):
    return op
  if op.opcode == HloOpcode.kTranspose:
    # Result dim i is op dim p2[i], which is inner dim p1[p2[i]].
    p1, p2 = op.dimensions, instr.dimensions
    composed = tuple(p1[d] for d in p2)
    inner = op.operand(0)
    if _is_identity(composed) and s.compatible(inner.shape, instr.shape):
      return inner
    return s.add(instr, hi.create_transpose(instr.shape, inner, composed))
  return _transpose_of_dot(instr, s)


def _transpose_of_dot(instr, s):
  """transpose(dot(a, b)) of a matrix product (one free dimension each
  side, no batch) is dot(b, a): the transpose costs a pass over memory."""
  dot = instr.operand(0)
  if (dot.opcode != HloOpcode.kDot or tuple(instr.dimensions) != (1, 0) or
      len(dot.users) != 1 or dot.control_predecessors or
      dot.control_successors):
    return None
  dn = dot.dot_dimension_numbers
  a, b = dot.operands
  if (dn.lhs_batch_dimensions or dn.rhs_batch_dimensions or
      a.shape.rank - len(dn.lhs_contracting_dimensions) != 1 or
      b.shape.rank - len(dn.rhs_contracting_dimensions) != 1):
    return None
  new = hi.HloInstruction(HloOpcode.kDot, instr.shape, [b, a])
  for key, value in dot.attrs.items():
    new.set_attr(key, value)
  new.set_attr("lhs_contracting_dims", tuple(dn.rhs_contracting_dimensions))
  new.set_attr("rhs_contracting_dims", tuple(dn.lhs_contracting_dimensions))
  precision = dot.attrs.get("operand_precision")
  if precision is not None and len(precision) == 2:
    new.set_attr("operand_precision", tuple(precision)[::-1])
  return s.add(instr, new)


def _broadcast(instr, s):
  op = instr.operand(0)
  if (_is_identity(instr.dimensions) and
      op.shape.rank == instr.shape.rank and
      s.compatible(op.shape, instr.shape)):
    return op
  if op.opcode == HloOpcode.kBroadcast:
    # Inner operand dim k lands in op dim d_in[k], then in dim d_out[...].
    d_in, d_out = op.dimensions, instr.dimensions
    dims = tuple(d_out[d] for d in d_in)
    return s.add(instr,
                 hi.create_broadcast(instr.shape, op.operand(0), dims))
  return None


def _slice(instr, s):
  op = instr.operand(0)
  full = all(start == 0 and limit == size and stride == 1
             for start, limit, stride, size in zip(
                 instr.slice_starts, instr.slice_limits, instr.slice_strides,
                 op.shape.dimensions))
  if full and s.compatible(op.shape, instr.shape):
    return op
  return None


_HANDLERS: dict[HloOpcode, Callable] = {
    HloOpcode.kBroadcast: _broadcast,
    HloOpcode.kReshape: _reshape,
    HloOpcode.kSlice: _slice,
    HloOpcode.kTranspose: _transpose,
}
for _opcode in _ELEMENT_RULES.opcodes:
  assert _opcode not in _HANDLERS, _opcode
  _HANDLERS[_opcode] = _ELEMENT_RULES.rewrite


def handled_opcodes() -> frozenset[HloOpcode]:
  return frozenset(_HANDLERS)


class AlgebraicSimplifier(hpi.HloComputationPass):
  """See the module docstring."""

  skip_fusion_computations = False

  def __init__(self, is_layout_sensitive: bool = False):
    self.is_layout_sensitive = is_layout_sensitive

  @property
  def name(self) -> str:
    return "algsimp"

  def compatible(self, a, b) -> bool:
    if self.is_layout_sensitive:
      return a == b
    return shape_util.compatible(a, b)

  @staticmethod
  def add(old, new):
    """Adds `new` to `old`'s computation, carrying `old`'s metadata."""
    new.metadata = old.metadata
    return old.parent.add_instruction(new)

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for instr in comp.make_instruction_post_order():
      if instr.parent is not comp:  # removed by an earlier replacement
        continue
      handler = _HANDLERS.get(instr.opcode)
      if handler is None:
        continue
      new = handler(instr, self)
      if new is None or new is instr:
        continue
      # Handlers only return compatible replacements (new instructions take
      # instr's shape); this guards the invariant.
      assert self.compatible(new.shape, instr.shape), (instr, new)
      comp.replace_instruction(instr, new)
      changed = True
    return changed
