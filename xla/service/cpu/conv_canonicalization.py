"""Convolutions in the dimension order the CPU's BLAS strategies take.

JAX's gradient of a convolution with respect to its kernel is itself a
convolution whose dimension numbers swap batch and features (`fb01_io01 ->
fb01` for an NCHW model): the original batch is contracted like a feature
and the window spans the whole image. In that order no feature dimension of
the kernel is contiguous with the window, so conv_emitter could only use
its generated loops (0.5-1.2 ms for the weight gradients of a small CNN
where a gemm takes a tenth of that). As XLA CPU's ConvCanonicalization
does, such a convolution becomes

    transpose(input)  -> (batch, spatial..., feature)
    transpose(kernel) -> (spatial..., input feature, output feature)
    convolution in that order -> (batch, spatial..., feature)
    transpose(result) -> the original output order

and the transposes (memory copies, fused with their neighbours where
possible) are cheap beside the convolution. Only convolutions the emitter
would otherwise run as loops and would run with a gemm once canonical (of
the types its gemms take, without groups) are rewritten; everything else
keeps its order.
"""

from __future__ import annotations

from xla import shape_util
from xla import xla_data
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.service.cpu import blas
from xla.service.cpu import conv_emitter


def _canonical(dn: xla_data.ConvolutionDimensionNumbers, n: int) -> bool:
  spatial = tuple(range(1, n + 1))
  return (dn.input_batch_dimension == 0 and
          dn.input_spatial_dimensions == spatial and
          dn.input_feature_dimension == n + 1 and
          dn.kernel_spatial_dimensions == tuple(range(n)) and
          dn.kernel_input_feature_dimension == n and
          dn.kernel_output_feature_dimension == n + 1 and
          dn.output_batch_dimension == 0 and
          dn.output_spatial_dimensions == spatial and
          dn.output_feature_dimension == n + 1)


def _eligible(conv) -> bool:
  if (conv.feature_group_count or 1) != 1 or (conv.batch_group_count or 1) != 1:
    return False
  et = conv.shape.element_type
  if et not in blas.GEMM_TYPES or blas.library() is None:
    return False
  if any(o.shape.element_type != et for o in conv.operands):
    return False
  if any(d == 0 for o in (conv, *conv.operands) for d in o.shape.dimensions):
    return False
  dn = conv.convolution_dimension_numbers
  if _canonical(dn, len(dn.input_spatial_dimensions)):
    return False
  return conv_emitter.describe(conv) == "loops"


def _transpose(comp, x, perm):
  dims = tuple(x.shape.dimensions[p] for p in perm)
  t = comp.add_instruction(hi.create_transpose(
      shape_util.make_shape(x.shape.element_type, dims), x, perm))
  t.metadata = x.metadata
  return t


class ConvCanonicalization(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "convolution-canonicalization"

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for conv in list(comp.instructions):
      if conv.opcode != HloOpcode.kConvolution or not _eligible(conv):
        continue
      changed |= self._rewrite(comp, conv)
    return changed

  def _rewrite(self, comp, conv) -> bool:
    """Rewrites `conv` if the canonical convolution gets a BLAS strategy
    (a small f64 window may still be loops: then nothing changes)."""
    dn = conv.convolution_dimension_numbers
    n = len(dn.input_spatial_dimensions)
    lhs = _transpose(comp, conv.operand(0), (
        dn.input_batch_dimension, *dn.input_spatial_dimensions,
        dn.input_feature_dimension))
    rhs = _transpose(comp, conv.operand(1), (
        *dn.kernel_spatial_dimensions, dn.kernel_input_feature_dimension,
        dn.kernel_output_feature_dimension))
    out_perm = (dn.output_batch_dimension, *dn.output_spatial_dimensions,
                dn.output_feature_dimension)
    out_dims = tuple(conv.shape.dimensions[p] for p in out_perm)
    spatial = tuple(range(1, n + 1))
    attrs = dict(conv.attrs)
    attrs["dim_labels"] = xla_data.ConvolutionDimensionNumbers(
        input_batch_dimension=0, input_feature_dimension=n + 1,
        input_spatial_dimensions=spatial,
        kernel_input_feature_dimension=n, kernel_output_feature_dimension=n + 1,
        kernel_spatial_dimensions=tuple(range(n)),
        output_batch_dimension=0, output_feature_dimension=n + 1,
        output_spatial_dimensions=spatial)
    new = comp.add_instruction(hi.HloInstruction(
        HloOpcode.kConvolution,
        shape_util.make_shape(conv.shape.element_type, out_dims),
        [lhs, rhs], attrs))
    new.metadata = conv.metadata
    if conv_emitter.describe(new) == "loops":
      comp.remove_instruction_and_unused_operands(new)
      return False
    # out_perm maps result dims to canonical ones; invert it back.
    back = [0] * len(out_perm)
    for canonical_dim, original_dim in enumerate(out_perm):
      back[original_dim] = canonical_dim
    result = _transpose(comp, new, tuple(back))
    comp.replace_instruction(conv, result)
    return True
