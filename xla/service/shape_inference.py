"""Shape inference for HLO operations (xla/service/shape_inference.cc).

Functions over shapes and attribute values: `infer_binary_op_shape(add,
f32[2], f32[2])`, `infer_dot_shape(...)`, ... Each returns the result shape
(without a layout) or raises InvalidArgumentError saying which operand or
attribute is inconsistent. `instruction_shape_inference` applies them to
HloInstructions, one rule per opcode.

Rules follow XLA's HLO semantics (operation_semantics.md): elementwise
operands have equal dimensions (no implicit broadcasting in HLO), compare
yields PRED, reduce removes the reduced dimensions, dot produces batch, lhs
free, then rhs free dimensions, and so on.
"""

from __future__ import annotations

from typing import Sequence

import support
from xla import primitive_util
from xla import shape_util
from xla import xla_data
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.shape import Shape
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType


def _fail(message: str):
  raise support.InvalidArgumentError(message)


def _s(shape: Shape) -> str:
  return shape.to_string()


def _need_array(shape: Shape, what: str) -> None:
  if not shape.is_array():
    _fail(f"{what} must be an array, but is {_s(shape)}")


def _check_dims_in_range(dims: Sequence[int], rank: int, what: str) -> None:
  if len(set(dims)) != len(dims):
    _fail(f"{what} {list(dims)} contains duplicates")
  for d in dims:
    if not 0 <= d < rank:
      _fail(f"{what} {list(dims)} out of range for rank {rank}")


def _array(element_type: PrimitiveType, dims, dynamic=()) -> Shape:
  return Shape(element_type, tuple(dims), tuple(dynamic))


def _is_float_or_complex(t) -> bool:
  return primitive_util.is_floating_point(t) or primitive_util.is_complex(t)


# -- elementwise ---------------------------------------------------------------

_FLOAT_UNARY = frozenset({
    O.kAcos, O.kAcosh, O.kAsin, O.kAsinh, O.kAtan, O.kAtanh, O.kCbrt,
    O.kCeil, O.kCos, O.kCosh, O.kErf, O.kExp, O.kExpm1, O.kFloor, O.kLog,
    O.kLog1p, O.kLogistic, O.kRoundNearestAfz, O.kRoundNearestEven,
    O.kRsqrt, O.kSin, O.kSinh, O.kSqrt, O.kTan, O.kTanh, O.kReducePrecision,
})
_REAL_ONLY = frozenset({O.kCeil, O.kFloor, O.kRoundNearestAfz,
                        O.kRoundNearestEven, O.kReducePrecision, O.kCbrt,
                        O.kErf, O.kAtan})
_INT_UNARY = frozenset({O.kClz, O.kPopulationCount})


def infer_unary_op_shape(opcode: HloOpcode, operand: Shape) -> Shape:
  _need_array(operand, f"operand of {opcode.value}")
  t = operand.element_type
  if opcode in _FLOAT_UNARY:
    if not _is_float_or_complex(t) or (opcode in _REAL_ONLY and
                                       primitive_util.is_complex(t)):
      _fail(f"expected element type in shape to be floating"
            f"{'' if opcode in _REAL_ONLY else ' or complex'} for "
            f"{opcode.value} operation; got {_s(operand)}")
    return operand.without_layout()
  if opcode in _INT_UNARY:
    if not primitive_util.is_integral(t):
      _fail(f"expected an integral element type for {opcode.value}; got "
            f"{_s(operand)}")
    return operand.without_layout()
  if opcode == O.kNot:
    if not (t == P.PRED or primitive_util.is_integral(t)):
      _fail(f"expected pred or an integral element type for not; got "
            f"{_s(operand)}")
    return operand.without_layout()
  if opcode == O.kIsFinite:
    if not primitive_util.is_floating_point(t):
      _fail(f"expected a floating point element type for is-finite; got "
            f"{_s(operand)}")
    return operand.without_layout().with_element_type(P.PRED)
  if opcode in (O.kAbs, O.kReal, O.kImag):
    if t == P.PRED or primitive_util.is_unsigned_integral(t) and (
        opcode != O.kAbs):
      _fail(f"expected a signed or floating element type for "
            f"{opcode.value}; got {_s(operand)}")
    if opcode in (O.kReal, O.kImag) and not _is_float_or_complex(t):
      _fail(f"expected a floating or complex element type for "
            f"{opcode.value}; got {_s(operand)}")
    return operand.without_layout().with_element_type(
        primitive_util.component_type(t))
  if opcode in (O.kNegate, O.kSign):
    if t == P.PRED:
      _fail(f"{opcode.value} does not accept PRED operands")
    return operand.without_layout()
  if opcode in (O.kCopy, O.kOptimizationBarrier, O.kCopyStart):
    return operand.without_layout()
  _fail(f"{opcode.value} is not a unary elementwise operation")


_SHIFTS = frozenset({O.kShiftLeft, O.kShiftRightArithmetic,
                     O.kShiftRightLogical})
_LOGICAL = frozenset({O.kAnd, O.kOr, O.kXor})


def infer_binary_op_shape(opcode: HloOpcode, lhs: Shape,
                          rhs: Shape) -> Shape:
  _need_array(lhs, f"lhs of {opcode.value}")
  _need_array(rhs, f"rhs of {opcode.value}")
  if lhs.dimensions != rhs.dimensions:
    _fail(f"binary op {opcode.value} with incompatible shapes: {_s(lhs)} "
          f"and {_s(rhs)}")
  if lhs.element_type != rhs.element_type:
    _fail(f"binary op {opcode.value} with different element types: "
          f"{_s(lhs)} and {_s(rhs)}")
  t = lhs.element_type
  dynamic = tuple(a or b for a, b in zip(lhs.dynamic_dimensions,
                                         rhs.dynamic_dimensions))
  result = _array(t, lhs.dimensions, dynamic)
  if opcode == O.kCompare:
    return result.with_element_type(P.PRED)
  if opcode == O.kComplex:
    ct = primitive_util.complex_type_of(t)
    if ct is None:
      _fail(f"complex requires F32 or F64 operands; got {_s(lhs)}")
    return result.with_element_type(ct)
  if opcode in _LOGICAL and not (t == P.PRED or
                                 primitive_util.is_integral(t)):
    _fail(f"expected pred or integral operands for {opcode.value}; got "
          f"{_s(lhs)}")
  if opcode in _SHIFTS and not primitive_util.is_integral(t):
    _fail(f"expected integral operands for {opcode.value}; got {_s(lhs)}")
  if opcode == O.kAtan2 and not _is_float_or_complex(t):
    _fail(f"expected floating point operands for atan2; got {_s(lhs)}")
  return result


def infer_select_shape(pred: Shape, on_true: Shape, on_false: Shape) -> Shape:
  _need_array(pred, "select predicate")
  if pred.element_type != P.PRED:
    _fail(f"select's pred operand must have PRED element type; got "
          f"{_s(pred)}")
  if not shape_util.compatible(on_true, on_false):
    _fail(f"operands to select must be the same shape; got {_s(on_true)} "
          f"and {_s(on_false)}")
  if pred.dimensions != on_true.dimensions:
    _fail(f"operands to select and predicate must be the same shape; got "
          f"{_s(pred)} and {_s(on_true)}")
  return on_true.without_layout()


def infer_clamp_shape(low: Shape, operand: Shape, high: Shape) -> Shape:
  _need_array(operand, "clamp operand")
  for bound, name in ((low, "min"), (high, "max")):
    if bound.element_type != operand.element_type:
      _fail(f"clamp {name} element type differs: {_s(bound)} vs "
            f"{_s(operand)}")
    if not bound.is_scalar() and bound.dimensions != operand.dimensions:
      _fail(f"clamp {name} {_s(bound)} must be a scalar or match the "
            f"operand {_s(operand)}")
  return operand.without_layout()


# -- shape manipulation --------------------------------------------------------


def infer_transpose_shape(operand: Shape,
                          permutation: Sequence[int]) -> Shape:
  _need_array(operand, "transpose operand")
  if sorted(permutation) != list(range(operand.rank)):
    _fail(f"transpose dimensions {list(permutation)} are not a permutation "
          f"of the operand dimensions of {_s(operand)}")
  return shape_util.permute_dimensions(permutation, operand)


def infer_slice_shape(operand: Shape, starts, limits, strides) -> Shape:
  _need_array(operand, "slice operand")
  if not len(starts) == len(limits) == len(strides) == operand.rank:
    _fail(f"slice index count does not match the rank of {_s(operand)}")
  dims = []
  for d, (lo, hi, st) in enumerate(zip(starts, limits, strides)):
    size = operand.dimensions[d]
    if st <= 0:
      _fail(f"stride {st} of dimension {d} must be positive")
    if not 0 <= lo <= hi <= size and not operand.dynamic_dimensions[d]:
      _fail(f"slice [{lo}:{hi}] of dimension {d} is out of bounds for "
            f"{_s(operand)}")
    dims.append(-(-(hi - lo) // st))
  return _array(operand.element_type, dims)


def infer_concatenate_shape(operands: Sequence[Shape],
                            dimension: int) -> Shape:
  if not operands:
    _fail("concatenate expects at least one operand")
  first = operands[0]
  for s in operands:
    _need_array(s, "concatenate operand")
  if not 0 <= dimension < first.rank:
    _fail(f"concatenate dimension {dimension} out of range for rank "
          f"{first.rank}")
  total = 0
  for i, s in enumerate(operands):
    if s.rank != first.rank or s.element_type != first.element_type:
      _fail(f"concatenate operand {i} {_s(s)} does not match {_s(first)}")
    for d in range(first.rank):
      if d != dimension and s.dimensions[d] != first.dimensions[d]:
        _fail(f"concatenate operand {i} {_s(s)} differs from {_s(first)} "
              f"in dimension {d}")
    total += s.dimensions[dimension]
  dims = list(first.dimensions)
  dims[dimension] = total
  return _array(first.element_type, dims)


def infer_pad_shape(operand: Shape, pad_value: Shape,
                    config: xla_data.PaddingConfig) -> Shape:
  _need_array(operand, "pad operand")
  if not pad_value.is_scalar() or (pad_value.element_type !=
                                   operand.element_type):
    _fail(f"pad value {_s(pad_value)} must be a scalar of the operand's "
          f"element type")
  if len(config.dimensions) != operand.rank:
    _fail(f"padding config has {len(config.dimensions)} dimensions, "
          f"operand {_s(operand)} has {operand.rank}")
  dims = []
  for d, p in zip(operand.dimensions, config.dimensions):
    if p.interior_padding < 0:
      _fail(f"interior padding cannot be negative: {p.interior_padding}")
    size = (d + p.edge_padding_low + p.edge_padding_high +
            max(d - 1, 0) * p.interior_padding)
    if size < 0:
      _fail(f"padding results in a negative size for dimension of {d}")
    dims.append(size)
  return _array(operand.element_type, dims)


def infer_reverse_shape(operand: Shape, dims: Sequence[int]) -> Shape:
  _need_array(operand, "reverse operand")
  _check_dims_in_range(dims, operand.rank, "reverse dimensions")
  return operand.without_layout()


def infer_dot_shape(lhs: Shape, rhs: Shape,
                    dnums: xla_data.DotDimensionNumbers,
                    result_type: Optional[PrimitiveType] = None) -> Shape:
  _need_array(lhs, "dot lhs")
  _need_array(rhs, "dot rhs")
  lb, rb = dnums.lhs_batch_dimensions, dnums.rhs_batch_dimensions
  lc, rc = dnums.lhs_contracting_dimensions, dnums.rhs_contracting_dimensions
  if len(lb) != len(rb):
    _fail(f"must specify the same number of batch dimensions for lhs and "
          f"rhs: {list(lb)} vs {list(rb)}")
  if len(lc) != len(rc):
    _fail(f"must specify the same number of contracting dimensions for lhs "
          f"and rhs: {list(lc)} vs {list(rc)}")
  _check_dims_in_range(tuple(lb) + tuple(lc), lhs.rank,
                       "lhs batch and contracting dimensions")
  _check_dims_in_range(tuple(rb) + tuple(rc), rhs.rank,
                       "rhs batch and contracting dimensions")
  for a, b in zip(lc, rc):
    if lhs.dimensions[a] != rhs.dimensions[b]:
      _fail(f"contracting dimension sizes are not compatible: lhs "
            f"{_s(lhs)} dimension {a} vs rhs {_s(rhs)} dimension {b}")
  for a, b in zip(lb, rb):
    if lhs.dimensions[a] != rhs.dimensions[b]:
      _fail(f"batch dimension sizes are not compatible: lhs {_s(lhs)} "
            f"dimension {a} vs rhs {_s(rhs)} dimension {b}")
  if result_type is None:
    if lhs.element_type != rhs.element_type:
      _fail(f"dot operands have different element types {_s(lhs)} and "
            f"{_s(rhs)}; the result type must be given")
    result_type = lhs.element_type
  dims = [lhs.dimensions[d] for d in lb]
  dims += [s for i, s in enumerate(lhs.dimensions) if i not in lb + lc]
  dims += [s for i, s in enumerate(rhs.dimensions) if i not in rb + rc]
  return _array(result_type, dims)


def infer_reduce_shape(operands: Sequence[Shape], inits: Sequence[Shape],
                       dims: Sequence[int], to_apply=None) -> Shape:
  if not operands or len(operands) != len(inits):
    _fail(f"reduce needs as many init values as inputs; got "
          f"{len(operands)} inputs and {len(inits)} init values")
  first = operands[0]
  for i, s in enumerate(operands):
    _need_array(s, f"reduce input {i}")
    if s.dimensions != first.dimensions:
      _fail(f"reduce inputs must have the same dimensions: {_s(s)} vs "
            f"{_s(first)}")
  for i, s in enumerate(inits):
    if not s.is_scalar():
      _fail(f"reduce init value {i} must be a scalar, got {_s(s)}")
  _check_dims_in_range(dims, first.rank, "reduce dimensions")
  kept = [d for i, d in enumerate(first.dimensions) if i not in dims]
  results = [_array(init.element_type, kept) for init in inits]
  if to_apply is not None:
    scalars = [shape_util.scalar(i.element_type) for i in inits]
    _check_reducer(to_apply, scalars, "reduce")
  return results[0] if len(results) == 1 else Shape.tuple_of(results)


def _check_reducer(computation, accumulators: Sequence[Shape],
                   what: str) -> None:
  """A reducer takes (accumulators..., values...) scalars and returns the
  accumulators (a tuple when there are several)."""
  ps = computation.program_shape()
  n = len(accumulators)
  if len(ps.parameters) != 2 * n:
    _fail(f"{what} computation {computation.name} takes "
          f"{len(ps.parameters)} parameters, expected {2 * n}")
  for i, p in enumerate(ps.parameters):
    want = accumulators[i % n]
    if not shape_util.compatible(p, want):
      _fail(f"{what} computation {computation.name} parameter {i} has shape "
            f"{_s(p)}, expected {_s(want)}")
  want_result = accumulators[0] if n == 1 else Shape.tuple_of(accumulators)
  if not shape_util.compatible(ps.result, want_result):
    _fail(f"{what} computation {computation.name} returns {_s(ps.result)}, "
          f"expected {_s(want_result)}")


def _window_output_size(size, dim: xla_data.WindowDimension) -> int:
  if dim.stride <= 0 or dim.size <= 0 or dim.base_dilation <= 0 or (
      dim.window_dilation <= 0):
    _fail(f"window dimension {dim} has a non-positive size, stride or "
          f"dilation")
  padded = ((size - 1) * dim.base_dilation + 1 if size else 0) + (
      dim.padding_low + dim.padding_high)
  window = (dim.size - 1) * dim.window_dilation + 1
  if padded < window:
    return 0
  return (padded - window) // dim.stride + 1


def infer_reduce_window_shape(operands: Sequence[Shape],
                              inits: Sequence[Shape],
                              window: xla_data.Window, to_apply=None) -> Shape:
  first = operands[0]
  if len(window.dimensions) != first.rank:
    _fail(f"window has {len(window.dimensions)} dimensions, operand "
          f"{_s(first)} has {first.rank}")
  dims = [_window_output_size(s, w)
          for s, w in zip(first.dimensions, window.dimensions)]
  if to_apply is not None:
    _check_reducer(to_apply, [shape_util.scalar(i.element_type)
                              for i in inits], "reduce-window")
  results = [_array(i.element_type, dims) for i in inits]
  return results[0] if len(results) == 1 else Shape.tuple_of(results)


def infer_convolution_shape(lhs: Shape, rhs: Shape, window: xla_data.Window,
                            dnums: xla_data.ConvolutionDimensionNumbers,
                            feature_group_count: int = 1,
                            batch_group_count: int = 1,
                            result_type: Optional[PrimitiveType] = None
                            ) -> Shape:
  _need_array(lhs, "convolution lhs")
  _need_array(rhs, "convolution rhs")
  n = len(dnums.input_spatial_dimensions)
  if lhs.rank != n + 2 or rhs.rank != n + 2:
    _fail(f"convolution with {n} spatial dimensions needs rank {n + 2} "
          f"operands; got {_s(lhs)} and {_s(rhs)}")
  if len(window.dimensions) != n:
    _fail(f"window has {len(window.dimensions)} dimensions, convolution has "
          f"{n} spatial dimensions")
  in_features = lhs.dimensions[dnums.input_feature_dimension]
  kernel_in = rhs.dimensions[dnums.kernel_input_feature_dimension]
  kernel_out = rhs.dimensions[dnums.kernel_output_feature_dimension]
  if feature_group_count <= 0 or in_features % feature_group_count or (
      in_features // feature_group_count != kernel_in):
    _fail(f"input feature dimension {in_features} / feature_group_count "
          f"{feature_group_count} must equal the kernel input feature "
          f"dimension {kernel_in}")
  batch = lhs.dimensions[dnums.input_batch_dimension]
  if batch_group_count <= 0 or batch % batch_group_count:
    _fail(f"batch {batch} is not divisible by batch_group_count "
          f"{batch_group_count}")
  for i in range(n):
    if window.dimensions[i].size != rhs.dimensions[
        dnums.kernel_spatial_dimensions[i]]:
      _fail(f"window size {window.dimensions[i].size} of spatial dimension "
            f"{i} differs from the kernel size "
            f"{rhs.dimensions[dnums.kernel_spatial_dimensions[i]]}")
  dims = [0] * (n + 2)
  dims[dnums.output_batch_dimension] = batch // batch_group_count
  dims[dnums.output_feature_dimension] = kernel_out
  for i in range(n):
    dims[dnums.output_spatial_dimensions[i]] = _window_output_size(
        lhs.dimensions[dnums.input_spatial_dimensions[i]],
        window.dimensions[i])
  if result_type is None:
    if lhs.element_type != rhs.element_type:
      _fail("convolution operands have different element types; the result "
            "type must be given")
    result_type = lhs.element_type
  return _array(result_type, dims)


def infer_gather_shape(operand: Shape, indices: Shape,
                       dnums: xla_data.GatherDimensionNumbers,
                       slice_sizes: Sequence[int]) -> Shape:
  _need_array(operand, "gather operand")
  _need_array(indices, "gather start indices")
  if not primitive_util.is_integral(indices.element_type):
    _fail(f"gather indices must be integral, got {_s(indices)}")
  ivd = dnums.index_vector_dim
  if not 0 <= ivd <= indices.rank:
    _fail(f"gather index_vector_dim {ivd} out of bounds for {_s(indices)}")
  index_len = indices.dimensions[ivd] if ivd < indices.rank else 1
  if len(dnums.start_index_map) != index_len:
    _fail(f"gather start_index_map has {len(dnums.start_index_map)} "
          f"entries; the index vector has {index_len}")
  if len(slice_sizes) != operand.rank:
    _fail(f"gather slice_sizes has {len(slice_sizes)} entries for operand "
          f"rank {operand.rank}")
  for i, (s, d) in enumerate(zip(slice_sizes, operand.dimensions)):
    if not 0 <= s <= d:
      _fail(f"gather slice size {s} of dimension {i} is out of bounds for "
            f"{_s(operand)}")
  removed = set(dnums.collapsed_slice_dims) | set(
      dnums.operand_batching_dims)
  for d in removed:
    if not 0 <= d < operand.rank or slice_sizes[d] > 1:
      _fail(f"gather collapsed/batching dimension {d} must have slice "
            f"size <= 1")
  offsets = [s for i, s in enumerate(slice_sizes) if i not in removed]
  if len(offsets) != len(dnums.offset_dims):
    _fail(f"gather offset_dims has {len(dnums.offset_dims)} entries; "
          f"{len(offsets)} slice dimensions remain")
  batch = [d for i, d in enumerate(indices.dimensions) if i != ivd]
  rank = len(batch) + len(offsets)
  if sorted(dnums.offset_dims) != list(dnums.offset_dims) or any(
      not 0 <= d < rank for d in dnums.offset_dims):
    _fail(f"gather offset_dims {list(dnums.offset_dims)} must be sorted and "
          f"within the output rank {rank}")
  dims, b, o = [], iter(batch), iter(offsets)
  for i in range(rank):
    dims.append(next(o) if i in dnums.offset_dims else next(b))
  return _array(operand.element_type, dims)


# Helpers shared with instruction_shape_inference.
fail = _fail
shape_str = _s
need_array = _need_array
array_shape = _array
check_reducer = _check_reducer
window_output_size = _window_output_size
is_float_or_complex = _is_float_or_complex
