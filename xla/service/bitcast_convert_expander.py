"""Expands a bitcast-convert that changes the element width into
same-width bitcast-converts, integer converts, shifts and ors.

    u32[..., 2] -> u64[...]:   lo | hi << 32     (the narrow dimension is
    u64[...] -> u32[..., 2]:   (x >> 32*j) for j  the bits of one wide
                                                   element, least significant
                                                   first, as in memory on a
                                                   little-endian host)

HLO's width-changing bitcast-convert adds (narrowing) or removes (widening)
a minor dimension of size wide_width / narrow_width. Its elements are not
elementwise functions of the operand's, so the elemental emitter does not
take it; expanded, every piece is elementwise or a broadcast / slice, which
fuse. JAX emits it for its "rbg" PRNG (u32 pairs <-> u64) and for
`lax.bitcast_convert_type` between widths.

Element types handled: integers and floats of 8, 16, 32 and 64 bits. Others
(pred, complex, sub-byte, fp8) are left as they are; the backend then
reports them.
"""

from __future__ import annotations

import numpy as np

from xla import primitive_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.literal import Literal
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P

O = HloOpcode

_UNSIGNED = {8: P.U8, 16: P.U16, 32: P.U32, 64: P.U64}
_HANDLED = frozenset({P.S8, P.S16, P.S32, P.S64, P.U8, P.U16, P.U32, P.U64,
                      P.F16, P.BF16, P.F32, P.F64})


def _width(et) -> int:
  return primitive_util.bit_width(et)


def expandable(instr) -> bool:
  """A width-changing bitcast-convert between handled element types."""
  if instr.opcode != O.kBitcastConvert or not instr.shape.is_array():
    return False
  src, dst = instr.operand(0).shape.element_type, instr.shape.element_type
  return (src in _HANDLED and dst in _HANDLED and
          _width(src) != _width(dst))


class _Builder:
  """Adds instructions to one computation."""

  def __init__(self, comp):
    self.comp = comp

  def add(self, instr):
    return self.comp.add_instruction(instr)

  def as_type(self, x, et):
    """`x` reinterpreted (same width) as element type `et`."""
    if x.shape.element_type == et:
      return x
    return self.add(hi.create(O.kBitcastConvert,
                              x.shape.with_element_type(et), [x]))

  def splat(self, value: int, shape: Shape):
    scalar = self.add(hi.create_constant(
        Literal.scalar(value, shape.element_type)))
    return self.add(hi.create_broadcast(shape, scalar, ()))


def _widen(b: _Builder, instr):
  """[..., k] narrow -> [...] wide."""
  x = instr.operand(0)
  narrow, wide = x.shape.element_type, instr.shape.element_type
  ws, wd = _width(narrow), _width(wide)
  k = wd // ws
  dims = tuple(instr.shape.dimensions)
  bits = b.as_type(x, _UNSIGNED[ws])
  uwide = Shape.array(_UNSIGNED[wd], dims)
  acc = None
  for j in range(k):
    piece = b.add(hi.create_slice(
        Shape.array(_UNSIGNED[ws], dims + (1,)), bits,
        (0,) * len(dims) + (j,), dims + (j + 1,)))
    piece = b.add(hi.create_reshape(Shape.array(_UNSIGNED[ws], dims), piece))
    part = b.add(hi.create_convert(uwide, piece))
    if j:
      part = b.add(hi.create_binary(uwide, O.kShiftLeft, part,
                                    b.splat(j * ws, uwide)))
    acc = part if acc is None else b.add(
        hi.create_binary(uwide, O.kOr, acc, part))
  return b.as_type(acc, wide)


def _narrow(b: _Builder, instr):
  """[...] wide -> [..., k] narrow."""
  x = instr.operand(0)
  wide, narrow = x.shape.element_type, instr.shape.element_type
  wd, ws = _width(wide), _width(narrow)
  k = wd // ws
  dims = tuple(x.shape.dimensions)
  out_dims = dims + (k,)
  bits = b.as_type(x, _UNSIGNED[wd])
  uwide = Shape.array(_UNSIGNED[wd], out_dims)
  spread = b.add(hi.create_broadcast(uwide, bits, tuple(range(len(dims)))))
  shifts = b.add(hi.create_constant(Literal.from_array(
      np.arange(k, dtype=np.uint64) * ws, _UNSIGNED[wd])))
  shifts = b.add(hi.create_broadcast(uwide, shifts, (len(dims),)))
  shifted = b.add(hi.create_binary(uwide, O.kShiftRightLogical, spread,
                                   shifts))
  pieces = b.add(hi.create_convert(Shape.array(_UNSIGNED[ws], out_dims),
                                   shifted))
  return b.as_type(pieces, narrow)


class BitcastConvertExpander(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "bitcast-convert-expander"

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for instr in list(comp.instructions):
      if instr.parent is not comp or not expandable(instr):
        continue
      b = _Builder(comp)
      widening = (_width(instr.shape.element_type) >
                  _width(instr.operand(0).shape.element_type))
      new = _widen(b, instr) if widening else _narrow(b, instr)
      comp.replace_instruction(instr, new)
      changed = True
    return changed
