"""Sinks reshapes and transposes below elementwise ops
(xla/hlo/transforms/simplifiers/reshape_mover.h), plus the layout-aware
"is this reshape / transpose a bitcast" predicates.

A "rearrange" is a reshape or a transpose. Two rearranges are equivalent if
they have the same opcode, the same operand dimensions and (transposes) the
same permutation; they then produce the same result dimensions.

An elementwise instruction is rewritten when
  * at least one operand is a rearrange and all rearrange operands are
    equivalent, and
  * every other operand is trivially rearrangeable: a broadcast of a scalar
    (re-broadcast to the rearrange's input dimensions) or a constant (its
    literal is rearranged inversely at compile time), and
  * the rewrite removes at least one rearrange: there are two or more
    rearrange operands, or the single one has no other user (so it dies and
    the new rearrange below the op takes its place; this is what lets a
    reshape travel down a chain of elementwise ops).

  add(reshape(a), reshape(b))       -> reshape(add(a, b))
  mul(transpose(a), broadcast(s))   -> transpose(mul(a, broadcast'(s)))

Side-effecting instructions are never moved through. Rearranges of a
constant or of a scalar broadcast do not count as rearrange operands (they
are trivially rearrangeable themselves), as in XLA.

`reshape_is_bitcast(in, out)` / `transpose_is_bitcast(in, out, perm)` tell
whether the op only reinterprets the buffer: the physical (layout) order of
the elements is unchanged. Missing layouts count as the default row-major
layout.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from xla import shape_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.literal import Literal
from xla.shape import Shape

_REARRANGES = (HloOpcode.kReshape, HloOpcode.kTranspose)

# Above this many elements the bitcast predicates stop enumerating elements
# and answer conservatively (see `_physical_order`).
_MAX_ENUMERATED_ELEMENTS = 1 << 20


# -- bitcast predicates --------------------------------------------------------


def _physical_offsets(shape: Shape) -> Optional[np.ndarray]:
  """offsets[k] = physical position of the element with row-major logical
  index k, or None when the shape is too large to enumerate."""
  dims = shape.dimensions
  n = shape_util.element_count(shape)
  if n > _MAX_ENUMERATED_ELEMENTS:
    return None
  m2m = shape_util.minor_to_major(shape)
  strides = [0] * len(dims)
  stride = 1
  for d in m2m:
    strides[d] = stride
    stride *= dims[d]
  idx = np.indices(dims).reshape(len(dims), -1) if dims else np.zeros(
      (0, 1), np.int64)
  return (idx * np.array(strides, np.int64).reshape(-1, 1)).sum(axis=0)


def _nondegenerate_order_is_logical(shape: Shape) -> bool:
  """True if, ignoring size-1 dimensions, the layout is row-major."""
  m2m = [d for d in shape_util.minor_to_major(shape)
         if shape.dimensions[d] != 1]
  return m2m == sorted(m2m, reverse=True)


def reshape_is_bitcast(input_shape: Shape, output_shape: Shape) -> bool:
  """True if reshaping `input_shape` to `output_shape` keeps every element
  at its physical position (layouts respected)."""
  if input_shape.element_type != output_shape.element_type:
    return False
  if (shape_util.element_count(input_shape) !=
      shape_util.element_count(output_shape)):
    return False
  a = _physical_offsets(input_shape)
  b = _physical_offsets(output_shape)
  if a is None or b is None:
    # Conservative for huge shapes: both physically in logical order.
    return (_nondegenerate_order_is_logical(input_shape) and
            _nondegenerate_order_is_logical(output_shape))
  return bool(np.array_equal(a, b))


def transpose_is_bitcast(input_shape: Shape, output_shape: Shape,
                         permutation) -> bool:
  """True if transposing by `permutation` (output dim i = input dim
  permutation[i]) keeps every element at its physical position."""
  if input_shape.element_type != output_shape.element_type:
    return False
  m2m_in = shape_util.minor_to_major(input_shape)
  m2m_out = shape_util.minor_to_major(output_shape)
  # Output dim i is input dim perm[i]; ignore size-1 dims (any position).
  mapped = [permutation[d] for d in m2m_out
            if output_shape.dimensions[d] != 1]
  kept = [d for d in m2m_in if input_shape.dimensions[d] != 1]
  return mapped == kept


# -- the pass ------------------------------------------------------------------


def _is_scalar_broadcast(instr) -> bool:
  return (instr.opcode == HloOpcode.kBroadcast and
          instr.operand(0).shape.is_array() and
          instr.operand(0).shape.rank == 0)


def _trivially_rearrangeable(instr) -> bool:
  if instr.opcode == HloOpcode.kConstant:
    return (instr.literal is not None and instr.shape.is_array() and
            not instr.literal.elided)
  return _is_scalar_broadcast(instr)


def _is_rearrange_candidate(instr) -> bool:
  """A rearrange operand worth moving: not itself of a trivial value."""
  return (instr.opcode in _REARRANGES and
          not _trivially_rearrangeable(instr.operand(0)))


def _equivalent(a, b) -> bool:
  if a.opcode != b.opcode:
    return False
  if a.operand(0).shape.dimensions != b.operand(0).shape.dimensions:
    return False
  if a.shape.dimensions != b.shape.dimensions:
    return False
  return a.opcode != HloOpcode.kTranspose or a.dimensions == b.dimensions


def _inverse_perm(perm) -> tuple[int, ...]:
  inv = [0] * len(perm)
  for i, p in enumerate(perm):
    inv[p] = i
  return tuple(inv)


class ReshapeMover(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "reshape-mover"

  def _rearranged_operand(self, comp, operand, first):
    """`operand` (trivially rearrangeable, or a rearrange equivalent to
    `first`) expressed in `first`'s input dimensions."""
    in_dims = first.operand(0).shape.dimensions
    if operand.opcode in _REARRANGES and _equivalent(operand, first):
      return operand.operand(0)
    if _is_scalar_broadcast(operand):
      shape = Shape.array(operand.shape.element_type, in_dims)
      return comp.add_instruction(
          hi.create_broadcast(shape, operand.operand(0), ()))
    # A constant: undo `first` on its literal.
    array = operand.literal.array
    if first.opcode == HloOpcode.kReshape:
      array = array.reshape(in_dims)
    else:
      array = np.transpose(array, _inverse_perm(first.dimensions))
    shape = Shape.array(operand.shape.element_type, in_dims)
    # ascontiguousarray makes a 0-d array 1-d: reshape back to `in_dims`.
    array = np.ascontiguousarray(array).reshape(in_dims)
    return comp.add_instruction(hi.create_constant(Literal(shape, array)))

  def _try_sink(self, comp, instr) -> bool:
    if (not instr.is_elementwise() or instr.has_side_effect() or
        not instr.shape.is_array() or instr.operand_count == 0):
      return False
    rearranges = [op for op in instr.operands if _is_rearrange_candidate(op)]
    if not rearranges:
      return False
    first = rearranges[0]
    for op in instr.operands:
      if op in rearranges:
        if not _equivalent(op, first):
          return False
      elif not _trivially_rearrangeable(op):
        return False
      if op.shape.dimensions != instr.shape.dimensions:
        return False  # e.g. a scalar clamp bound
    if len(rearranges) < 2 and any(u is not instr for u in first.users):
      return False  # nothing would be removed
    new_operands = [self._rearranged_operand(comp, op, first)
                    for op in instr.operands]
    in_dims = first.operand(0).shape.dimensions
    new_shape = Shape.array(instr.shape.element_type, in_dims)
    new_op = hi.HloInstruction(instr.opcode, new_shape, new_operands,
                               dict(instr.attrs))
    new_op.metadata = instr.metadata
    comp.add_instruction(new_op)
    out_shape = instr.shape
    if first.opcode == HloOpcode.kReshape:
      moved = hi.create_reshape(out_shape, new_op)
    else:
      moved = hi.create_transpose(out_shape, new_op, first.dimensions)
    moved.metadata = first.metadata
    comp.add_instruction(moved)
    comp.replace_instruction(instr, moved)
    return True

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for instr in comp.make_instruction_post_order():
      if instr.parent is not comp:
        continue
      changed |= self._try_sink(comp, instr)
    return changed
