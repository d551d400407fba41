"""Algebraic simplification
(xla/hlo/transforms/simplifiers/algebraic_simplifier.h), a first set of
rules. Each rule is a handler registered for one opcode in `_HANDLERS`; it
returns the instruction that replaces the one visited, or None.

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

from typing import Callable, Optional

import numpy as np

from xla import primitive_util
from xla import shape_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.xla_data import PrimitiveType

# -- matchers ------------------------------------------------------------------


def splat_value(instr) -> Optional[object]:
  """The value of every element if `instr` is a constant (or a broadcast of
  a constant) whose elements are all equal; else None."""
  while instr.opcode == HloOpcode.kBroadcast:
    instr = instr.operand(0)
  if instr.opcode != HloOpcode.kConstant or instr.literal is None:
    return None
  if not instr.shape.is_array() or instr.literal.elided:
    return None
  array = instr.literal.array
  if array.size == 0:
    return None
  first = array.reshape(-1)[0]
  # Bitwise splat check: NaNs of equal bits count as equal.
  if array.tobytes() != np.full_like(array, first).tobytes():
    return None
  return first


def is_all(instr, value) -> bool:
  """True if every element of constant/splat `instr` equals `value`."""
  v = splat_value(instr)
  if v is None:
    return False
  try:
    return bool(v == value)
  except (TypeError, ValueError):
    return False


def _is_integral_or_pred(instr) -> bool:
  et = instr.shape.element_type
  return (primitive_util.is_integral(et) or
          et == PrimitiveType.PRED)


# -- handlers ------------------------------------------------------------------
# Each takes (instr, simplifier) and returns a replacement or None. New
# instructions are added to instr's computation by the handler.


def _add(instr, s):
  lhs, rhs = instr.operands
  if is_all(rhs, 0):
    return lhs
  if is_all(lhs, 0):
    return rhs
  return None


def _subtract(instr, s):
  lhs, rhs = instr.operands
  return lhs if is_all(rhs, 0) else None


def _multiply(instr, s):
  lhs, rhs = instr.operands
  if is_all(rhs, 1):
    return lhs
  if is_all(lhs, 1):
    return rhs
  if _is_integral_or_pred(instr):
    if is_all(rhs, 0):
      return rhs
    if is_all(lhs, 0):
      return lhs
  return None


def _negate(instr, s):
  op = instr.operand(0)
  if op.opcode == HloOpcode.kNegate:
    return op.operand(0)
  return None


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
             for (start, limit, stride), size in zip(instr.attr("slice"),
                                                     op.shape.dimensions))
  if full and s.compatible(op.shape, instr.shape):
    return op
  return None


def _convert(instr, s):
  op = instr.operand(0)
  if (op.shape.element_type == instr.shape.element_type and
      s.compatible(op.shape, instr.shape)):
    return op
  return None


def _concatenate(instr, s):
  if instr.operand_count == 1 and s.compatible(instr.operand(0).shape,
                                               instr.shape):
    return instr.operand(0)
  return None


_HANDLERS: dict[HloOpcode, Callable] = {
    HloOpcode.kAdd: _add,
    HloOpcode.kBroadcast: _broadcast,
    HloOpcode.kConcatenate: _concatenate,
    HloOpcode.kConvert: _convert,
    HloOpcode.kMultiply: _multiply,
    HloOpcode.kNegate: _negate,
    HloOpcode.kReshape: _reshape,
    HloOpcode.kSlice: _slice,
    HloOpcode.kSubtract: _subtract,
    HloOpcode.kTranspose: _transpose,
}


def handled_opcodes() -> frozenset[HloOpcode]:
  return frozenset(_HANDLERS)


class AlgebraicSimplifier(hpi.HloModulePass):
  """See the module docstring."""

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

  def run_on_computation(self, comp) -> bool:
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

  def run(self, module, execution_threads=frozenset()) -> bool:
    changed = False
    for comp in hpi.computations_to_run(module, execution_threads):
      changed |= self.run_on_computation(comp)
    return changed
