"""Large F16 / BF16 convolutions and F16 dots run in F32, on BLAS.

BLAS has no 16-bit float gemm, so conv_emitter and dot_emitter give F16 and
BF16 operands their generated loop kernels (which accumulate in f32 and
round once). On large products those run well below the f32 gemm: one
[8,32,32,16] x [3,3,16,32] "same" convolution took 770 us in BF16 and
1670 us in F16 against 470 us converted to f32 and back, and a
[256,512] x [512,512] F16 dot 1250 us against 800 us. (BF16 dots are
within a few percent of their f32 gemm: their loop kernel stays.) As XLA
CPU does for the 16-bit types its dot and convolution kernels lack, this
pass rewrites such an instruction to

    convert(op(convert(lhs) -> f32, convert(rhs) -> f32) -> f32) -> type

which keeps the result: both forms accumulate in f32 and round once. The
converts are cheap elementwise kernels, usually fused into the operands'
producers and the result's users. Small products keep the loop kernel,
where the converts cost more than the gemm saves (a [64,128] x [128,512]
F16 dot: 86 us direct against 100 us converted). Convolutions with feature
or batch groups (depthwise) stay as they are: their f32 form runs loops
too.
"""

from __future__ import annotations

import math

from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.service.cpu import blas
from xla.shape import Shape
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType

# Multiply-adds from which the f32 form is used.
MIN_CONV_MACS = 1 << 22
MIN_DOT_MACS = 1 << 24
_CONV_TYPES = (P.F16, P.BF16)
_DOT_TYPES = (P.F16,)
_RESULT_TYPES = (P.F16, P.BF16, P.F32)


def _macs(instr) -> int:
  out = math.prod(instr.shape.dimensions)
  if instr.opcode == O.kDot:
    lhs = instr.operand(0).shape.dimensions
    return out * math.prod(lhs[d] for d in
                       instr.dot_dimension_numbers.lhs_contracting_dimensions)
  dn = instr.convolution_dimension_numbers
  rhs = instr.operand(1).shape.dimensions
  return (out * rhs[dn.kernel_input_feature_dimension] *
          math.prod(rhs[d] for d in dn.kernel_spatial_dimensions))


def _candidate(instr) -> bool:
  if instr.opcode == O.kDot:
    types, threshold = _DOT_TYPES, MIN_DOT_MACS
  elif instr.opcode == O.kConvolution:
    if ((instr.feature_group_count or 1) != 1 or
        (instr.batch_group_count or 1) != 1):
      return False
    types, threshold = _CONV_TYPES, MIN_CONV_MACS
  else:
    return False
  lhs_t = instr.operand(0).shape.element_type
  if (lhs_t not in types or instr.operand(1).shape.element_type != lhs_t or
      instr.shape.element_type not in _RESULT_TYPES):
    return False
  if any(d == 0 for o in (instr, *instr.operands) for d in o.shape.dimensions):
    return False
  return _macs(instr) >= threshold


class LowPrecisionUpcast(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "cpu-low-precision-upcast"

  def run_on_computation(self, comp, context=None) -> bool:
    if blas.library() is None:
      return False
    changed = False
    for instr in list(comp.instructions):
      if instr.parent is comp and _candidate(instr):
        self._rewrite(comp, instr)
        changed = True
    return changed

  def _rewrite(self, comp, instr) -> None:
    wide = []
    for operand in instr.operands:
      c = comp.add_instruction(hi.create_convert(
          Shape.array(P.F32, operand.shape.dimensions), operand))
      c.metadata = operand.metadata
      wide.append(c)
    new = hi.HloInstruction(
        instr.opcode, Shape.array(P.F32, instr.shape.dimensions), wide,
        dict(instr.attrs), name=instr.name + ".f32")
    new.metadata = instr.metadata
    comp.add_instruction(new)
    result = new
    if instr.shape.element_type != P.F32:
      result = comp.add_instruction(hi.create_convert(instr.shape, new))
      result.metadata = instr.metadata
    comp.replace_instruction(instr, result)
