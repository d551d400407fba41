"""Per-op StableHLO -> HLO lowerings, registered in the op registry's
`hlo_lowering` slot.

Each lowering is `fn(importer, op) -> list[HloInstruction]` (one per op
result). The mapping follows XLA's mhlo/stablehlo -> HLO exporter: op names
and attributes carry over one to one where HLO has the same op; multi-result
ops produce a tuple-shaped instruction unpacked with get-tuple-element.
Ops that have no HLO counterpart here are marked unsupported with a reason.
"""

from __future__ import annotations

import math

import numpy as np

import support
from stablehlo import attributes as a
from stablehlo import types as t
from stablehlo.ops import registry
from xla import xla_data
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir import hlo_pattern
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.shape import Shape
from xla.translate import type_conversion as tc

# -- attribute readers ---------------------------------------------------------


def ints(attr, default=()) -> tuple[int, ...]:
  """An i64 list from a dense array / dense elements / array attribute."""
  if attr is None:
    return tuple(default)
  if isinstance(attr, a.DenseArrayAttr):
    return tuple(int(v) for v in attr.values)
  if isinstance(attr, a.DenseElementsAttr):
    return tuple(int(v) for v in attr.array.reshape(-1))
  if isinstance(attr, a.ArrayAttr):
    return tuple(int(e.value) for e in attr.elements)
  if isinstance(attr, (tuple, list)):
    return tuple(int(v) for v in attr)
  raise support.InvalidArgumentError(f"expected an integer list, got {attr}")


def int_attr(op, name, default=None):
  v = op.attr(name)
  if v is None:
    return default
  return int(v.value)


def bool_attr(op, name, default=False) -> bool:
  v = op.attr(name)
  if v is None:
    return default
  if isinstance(v, a.UnitAttr):
    return True
  return bool(v.value)


def enum_attr(op, name, default=None):
  v = op.attr(name)
  if v is None:
    return default
  if isinstance(v, a.DialectAttr):
    return v.get("value")
  if isinstance(v, a.StringAttr):
    return v.value
  raise support.InvalidArgumentError(f"{op.name}: bad enum attribute {name}")


def pairs(attr, rank) -> list[tuple[int, int]]:
  """An Nx2 padding attribute as (low, high) pairs (zeros when absent)."""
  if attr is None:
    return [(0, 0)] * rank
  flat = ints(attr)
  return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]


def precision(op) -> tuple:
  v = op.attr("precision_config")
  if v is None:
    return None
  return tuple(xla_data.Precision[e.get("value")] for e in v.elements)


def _shape(op):
  return tc.shape(op.result.type)


# -- registration ----------------------------------------------------------------


def _register(name):
  def deco(fn):
    registry.register_hlo_lowering(name, fn)
    return fn
  return deco


_UNARY = {
    "abs": O.kAbs, "cbrt": O.kCbrt, "ceil": O.kCeil,
    "count_leading_zeros": O.kClz, "cosine": O.kCos, "exponential": O.kExp,
    "exponential_minus_one": O.kExpm1, "floor": O.kFloor, "imag": O.kImag,
    "is_finite": O.kIsFinite, "log": O.kLog, "log_plus_one": O.kLog1p,
    "logistic": O.kLogistic, "negate": O.kNegate, "not": O.kNot,
    "popcnt": O.kPopulationCount, "real": O.kReal,
    "round_nearest_afz": O.kRoundNearestAfz,
    "round_nearest_even": O.kRoundNearestEven, "rsqrt": O.kRsqrt,
    "sign": O.kSign, "sine": O.kSin, "sqrt": O.kSqrt, "tan": O.kTan,
    "tanh": O.kTanh,
}
_BINARY = {
    "add": O.kAdd, "and": O.kAnd, "atan2": O.kAtan2, "complex": O.kComplex,
    "divide": O.kDivide, "maximum": O.kMaximum, "minimum": O.kMinimum,
    "multiply": O.kMultiply, "or": O.kOr, "power": O.kPower,
    "remainder": O.kRemainder, "shift_left": O.kShiftLeft,
    "shift_right_arithmetic": O.kShiftRightArithmetic,
    "shift_right_logical": O.kShiftRightLogical, "subtract": O.kSubtract,
    "xor": O.kXor,
}


def _simple(opcode):
  def lower(imp, op):
    return [imp.add(hi.create(opcode, _shape(op), imp.operands(op)))]
  return lower


@_register("stablehlo.select")
def _select(imp, op):
  pred, on_true, on_false = imp.operands(op)
  out = _shape(op)
  if pred.shape.rank == 0 and out.rank != 0:
    # StableHLO allows a scalar predicate; HLO select needs a full one.
    pred = imp.add(hi.create_broadcast(
        out.with_element_type(pred.shape.element_type), pred, ()))
  return [imp.add(hi.create(O.kSelect, out, (pred, on_true, on_false)))]


for _n, _o in {**_UNARY, **_BINARY,
               "clamp": O.kClamp, "reshape": O.kReshape,
               "bitcast_convert": O.kBitcastConvert,
               "dynamic_update_slice": O.kDynamicUpdateSlice,
               "tuple": O.kTuple, "after_all": O.kAfterAll,
               "create_token": O.kAfterAll}.items():
  registry.register_hlo_lowering(f"stablehlo.{_n}", _simple(_o))


@_register("stablehlo.triangular_solve")
def _triangular_solve(imp, op):
  transpose = enum_attr(op, "transpose_a", "NO_TRANSPOSE")
  return [imp.add(hi.create(
      O.kTriangularSolve, _shape(op), imp.operands(op),
      left_side=bool_attr(op, "left_side"), lower=bool_attr(op, "lower"),
      unit_diagonal=bool_attr(op, "unit_diagonal"),
      transpose_a=xla_data.Transpose[transpose]))]


@_register("stablehlo.constant")
def _constant(imp, op):
  value, ty = op.attr("value"), op.result.type
  shape = _shape(op)
  if (isinstance(value, a.DenseElementsAttr) and shape.is_array() and
      math.prod(shape.dimensions) > 1 and
      (value.splat or hlo_pattern.is_splat_array(value.array))):
    # A splat: a scalar constant broadcast, as XLA's simplifier would make
    # it. Materialised, a splat of a large shape costs its size in memory,
    # in every pass that looks at the literal, and as data in the kernel.
    scalar_ty = t.RankedTensorType((), t.element_type_of(ty))
    array = np.asarray(value.array)
    first = np.array(array[(0,) * array.ndim])  # no copy of a broadcast
    scalar = imp.add(hi.create_constant(tc.literal(
        a.DenseElementsAttr(scalar_ty, first, splat=True), scalar_ty)))
    return [imp.add(hi.create_broadcast(shape, scalar, ()))]
  return [imp.add(hi.create_constant(tc.literal(value, ty)))]


@_register("stablehlo.convert")
def _convert(imp, op):
  x = imp.operand(op, 0)
  src = t.element_type_of(op.operands[0].type)
  dst = t.element_type_of(op.result.type)
  if isinstance(src, t.ComplexType) and not isinstance(dst, t.ComplexType):
    # HLO convert does not drop the imaginary part; take the real part.
    real_shape = x.shape.with_element_type(tc.element_type(src.element_type))
    x = imp.add(hi.create(O.kReal, real_shape, (x,)))
  return [imp.add(hi.create_convert(_shape(op), x))]


@_register("stablehlo.compare")
def _compare(imp, op):
  ctype = enum_attr(op, "compare_type")
  lhs, rhs = imp.operands(op)
  return [imp.add(hi.create_compare(
      _shape(op), lhs, rhs, enum_attr(op, "comparison_direction"),
      xla_data.ComparisonType(ctype) if ctype and ctype != "NOTYPE"
      else None))]


@_register("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(imp, op):
  # HLO broadcast does not expand size-1 dimensions: reshape them away
  # first (as XLA's exporter does).
  x = imp.operand(op, 0)
  dims = ints(op.attr("broadcast_dimensions"))
  out = _shape(op)
  keep = [i for i, d in enumerate(dims)
          if not (x.shape.dimensions[i] == 1 and out.dimensions[d] != 1)]
  if len(keep) != len(dims):
    kept = [x.shape.dimensions[i] for i in keep]
    x = imp.add(hi.create_reshape(
        Shape.array(x.shape.element_type, kept,
                    layout=tc.default_layout(len(kept))), x))
    dims = [dims[i] for i in keep]
  return [imp.add(hi.create_broadcast(out, x, dims))]


@_register("stablehlo.broadcast")
def _broadcast(imp, op):
  # `broadcast` prepends broadcast_sizes: operand dims map to the trailing
  # result dims.
  rank = op.operands[0].type.rank
  out_rank = op.result.type.rank
  return [imp.add(hi.create_broadcast(
      _shape(op), imp.operand(op, 0), range(out_rank - rank, out_rank)))]


@_register("stablehlo.iota")
def _iota(imp, op):
  return [imp.add(hi.create_iota(_shape(op), int_attr(op, "iota_dimension")))]


@_register("stablehlo.transpose")
def _transpose(imp, op):
  return [imp.add(hi.create_transpose(_shape(op), imp.operand(op, 0),
                                      ints(op.attr("permutation"))))]


@_register("stablehlo.reverse")
def _reverse(imp, op):
  return [imp.add(hi.create(O.kReverse, _shape(op), imp.operands(op),
                            dimensions=ints(op.attr("dimensions"))))]


@_register("stablehlo.slice")
def _slice(imp, op):
  return [imp.add(hi.create_slice(
      _shape(op), imp.operand(op, 0), ints(op.attr("start_indices")),
      ints(op.attr("limit_indices")), ints(op.attr("strides")) or None))]


@_register("stablehlo.dynamic_slice")
def _dynamic_slice(imp, op):
  return [imp.add(hi.create(O.kDynamicSlice, _shape(op), imp.operands(op),
                            dynamic_slice_sizes=ints(op.attr("slice_sizes"))))]


@_register("stablehlo.concatenate")
def _concatenate(imp, op):
  return [imp.add(hi.create_concatenate(_shape(op), imp.operands(op),
                                        int_attr(op, "dimension")))]


@_register("stablehlo.pad")
def _pad(imp, op):
  lo = ints(op.attr("edge_padding_low"))
  hi_ = ints(op.attr("edge_padding_high"))
  interior = ints(op.attr("interior_padding"))
  config = xla_data.PaddingConfig(tuple(
      xla_data.PaddingDimension(l, h, i)
      for l, h, i in zip(lo, hi_, interior)))
  return [imp.add(hi.create(O.kPad, _shape(op), imp.operands(op),
                            padding=config))]


@_register("stablehlo.get_tuple_element")
def _gte(imp, op):
  return [imp.add(hi.create_get_tuple_element(imp.operand(op, 0),
                                              int_attr(op, "index")))]


@_register("stablehlo.reduce_precision")
def _reduce_precision(imp, op):
  return [imp.add(hi.create(
      O.kReducePrecision, _shape(op), imp.operands(op),
      exponent_bits=int_attr(op, "exponent_bits"),
      mantissa_bits=int_attr(op, "mantissa_bits")))]


@_register("stablehlo.fft")
def _fft(imp, op):
  return [imp.add(hi.create(
      O.kFft, _shape(op), imp.operands(op),
      fft_type=xla_data.FftType[enum_attr(op, "fft_type")],
      fft_length=ints(op.attr("fft_length"))))]


@_register("stablehlo.cholesky")
def _cholesky(imp, op):
  return [imp.add(hi.create(O.kCholesky, _shape(op), imp.operands(op),
                            lower=bool_attr(op, "lower")))]


@_register("stablehlo.replica_id")
def _replica_id(imp, op):
  return [imp.add(hi.create(O.kReplicaId, _shape(op)))]


@_register("stablehlo.partition_id")
def _partition_id(imp, op):
  return [imp.add(hi.create(O.kPartitionId, _shape(op)))]


@_register("stablehlo.get_dimension_size")
def _get_dimension_size(imp, op):
  return [imp.add(hi.create(O.kGetDimensionSize, _shape(op), imp.operands(op),
                            dimensions=(int_attr(op, "dimension"),)))]


@_register("stablehlo.optimization_barrier")
def _optimization_barrier(imp, op):
  arg = imp.tuple_or_single(imp.operands(op)) if len(op.operands) != 1 else (
      imp.add(hi.create_tuple(imp.operands(op))))
  barrier = imp.add(hi.create(O.kOptimizationBarrier, arg.shape, (arg,)))
  return [imp.add(hi.create_get_tuple_element(barrier, i))
          for i in range(len(op.results))]


@_register("stablehlo.rng")
def _rng(imp, op):
  dist = enum_attr(op, "rng_distribution")
  a_, b_ = imp.operands(op)[:2]
  return [imp.add(hi.create(
      O.kRng, _shape(op), (a_, b_),
      distribution=xla_data.RandomDistribution["RNG_" + dist]))]


@_register("stablehlo.rng_bit_generator")
def _rng_bit_generator(imp, op):
  alg = enum_attr(op, "rng_algorithm", "DEFAULT")
  algorithm = xla_data.RandomAlgorithm["RNG_" + alg]
  instr = imp.add(hi.create(O.kRngBitGenerator, imp.result_shape(op),
                            imp.operands(op), algorithm=algorithm))
  return imp.unpack(instr, 2)


@_register("stablehlo.batch_norm_inference")
def _batch_norm_inference(imp, op):
  return [imp.add(hi.create(
      O.kBatchNormInference, _shape(op), imp.operands(op),
      epsilon=float(op.attr("epsilon").value),
      feature_index=int_attr(op, "feature_index")))]


def _batch_norm_multi(opcode):
  def lower(imp, op):
    instr = imp.add(hi.create(
        opcode, imp.result_shape(op), imp.operands(op),
        epsilon=float(op.attr("epsilon").value),
        feature_index=int_attr(op, "feature_index")))
    return imp.unpack(instr, len(op.results))
  return lower


registry.register_hlo_lowering("stablehlo.batch_norm_training",
                               _batch_norm_multi(O.kBatchNormTraining))
registry.register_hlo_lowering("stablehlo.batch_norm_grad",
                               _batch_norm_multi(O.kBatchNormGrad))


# -- dot / convolution -----------------------------------------------------------


def _dot_attrs(op):
  attrs = {}
  p = precision(op)
  if p is not None and any(x != xla_data.Precision.DEFAULT for x in p):
    attrs["operand_precision"] = p
  return attrs


def _type_name(value) -> str:
  return value.name if isinstance(value, t.FloatType) else str(value)


# Float widths, for rounding an operand to a narrower precision type.
_FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
# The accumulation our dots use for the widest operand type (a narrower
# float accumulates in f32, as on XLA CPU).
_ACCUMULATION = {"bf16": "f32", "f16": "f32", "f32": "f32", "f64": "f64"}


def _dot_operands(imp, op):
  """The dot's operands, rounded as its `algorithm` asks.

  Algorithms are supported where they describe what the dot computes
  anyway, once each operand is rounded to its precision type: one
  component and one product each, accumulation in f32 (f64 for f64
  operands). JAX's dot_product_attention asks for BF16_BF16_F32 on bf16
  operands, and on f32 ones in its gradient; an f32 operand then goes
  through bf16 (convert there and back), as the algorithm specifies."""
  lhs, rhs = imp.operands(op)
  algorithm = op.attr("algorithm")
  if algorithm is None:
    return lhs, rhs
  params = dict(getattr(algorithm, "params", ()))
  types = [_type_name(t.element_type_of(o.type)) for o in op.operands[:2]]
  precisions = [_type_name(params.get("lhs_precision_type")),
                _type_name(params.get("rhs_precision_type"))]
  widest = max(types, key=lambda n: _FLOAT_BITS.get(n, 0))
  ok = (getattr(algorithm, "name", "") == "stablehlo.dot_algorithm" and
        all(n in _FLOAT_BITS for n in types + precisions) and
        all(p == o or _FLOAT_BITS[p] < _FLOAT_BITS[o]
            for p, o in zip(precisions, types)) and
        _type_name(params.get("accumulation_type")) ==
        _ACCUMULATION.get(widest) and
        params.get("lhs_component_count") == 1 and
        params.get("rhs_component_count") == 1 and
        params.get("num_primitive_operations") == 1)
  if not ok:
    described = ", ".join(
        f"{k} = {_type_name(v)}" for k, v in params.items())
    raise support.UnimplementedError(
        f"Unimplemented: {op.name} with dot algorithm <{described}> in HLO "
        "import (supported: one component and one product per operand, "
        "each operand in its own type or rounded to a narrower float, f32 "
        "accumulation (f64 for f64))")
  out = []
  for x, value, p, o in zip((lhs, rhs), op.operands[:2], precisions, types):
    if p != o:
      narrow = tc.shape(value.type).with_element_type(
          tc.element_type(t.FloatType(p)))
      x = imp.add(hi.create_convert(narrow, x))
      x = imp.add(hi.create_convert(tc.shape(value.type), x))
    out.append(x)
  return tuple(out)


@_register("stablehlo.dot")
def _dot(imp, op):
  lhs, rhs = _dot_operands(imp, op)
  dnums = xla_data.DotDimensionNumbers(
      lhs_contracting_dimensions=(op.operands[0].type.rank - 1,),
      rhs_contracting_dimensions=(0,))
  instr = hi.create_dot(_shape(op), lhs, rhs, dnums)
  for k, v in _dot_attrs(op).items():
    instr.set_attr(k, v)
  return [imp.add(instr)]


@_register("stablehlo.dot_general")
def _dot_general(imp, op):
  lhs, rhs = _dot_operands(imp, op)
  d = op.attr("dot_dimension_numbers")
  dnums = xla_data.DotDimensionNumbers(
      lhs_contracting_dimensions=ints(d.get("lhs_contracting_dimensions")),
      rhs_contracting_dimensions=ints(d.get("rhs_contracting_dimensions")),
      lhs_batch_dimensions=ints(d.get("lhs_batching_dimensions")),
      rhs_batch_dimensions=ints(d.get("rhs_batching_dimensions")))
  instr = hi.create_dot(_shape(op), lhs, rhs, dnums)
  for k, v in _dot_attrs(op).items():
    instr.set_attr(k, v)
  return [imp.add(instr)]


@_register("stablehlo.convolution")
def _convolution(imp, op):
  d = op.attr("dimension_numbers")
  dnums = xla_data.ConvolutionDimensionNumbers(
      input_batch_dimension=d.get("input_batch_dimension"),
      input_feature_dimension=d.get("input_feature_dimension"),
      input_spatial_dimensions=ints(d.get("input_spatial_dimensions")),
      kernel_input_feature_dimension=d.get("kernel_input_feature_dimension"),
      kernel_output_feature_dimension=d.get(
          "kernel_output_feature_dimension"),
      kernel_spatial_dimensions=ints(d.get("kernel_spatial_dimensions")),
      output_batch_dimension=d.get("output_batch_dimension"),
      output_feature_dimension=d.get("output_feature_dimension"),
      output_spatial_dimensions=ints(d.get("output_spatial_dimensions")))
  rhs_shape = op.operands[1].type.shape
  sizes = [rhs_shape[k] for k in dnums.kernel_spatial_dimensions]
  n = len(sizes)
  strides = ints(op.attr("window_strides"), (1,) * n)
  pads = pairs(op.attr("padding"), n)
  lhs_dil = ints(op.attr("lhs_dilation"), (1,) * n)
  rhs_dil = ints(op.attr("rhs_dilation"), (1,) * n)
  rev = op.attr("window_reversal")
  reversal = tuple(bool(v) for v in rev.values) if isinstance(
      rev, a.DenseArrayAttr) else (False,) * n
  window = xla_data.Window(tuple(
      xla_data.WindowDimension(
          size=sizes[i], stride=strides[i], padding_low=pads[i][0],
          padding_high=pads[i][1], window_dilation=rhs_dil[i],
          base_dilation=lhs_dil[i], window_reversal=reversal[i])
      for i in range(n)))
  attrs = dict(window=window, dim_labels=dnums,
               feature_group_count=int_attr(op, "feature_group_count", 1),
               batch_group_count=int_attr(op, "batch_group_count", 1))
  p = precision(op)
  if p is not None and any(x != xla_data.Precision.DEFAULT for x in p):
    attrs["operand_precision"] = p
  return [imp.add(hi.create(O.kConvolution, _shape(op), imp.operands(op),
                            **attrs))]


# -- gather / scatter ------------------------------------------------------------


@_register("stablehlo.gather")
def _gather(imp, op):
  d = op.attr("dimension_numbers")
  return [imp.add(hi.create(
      O.kGather, _shape(op), imp.operands(op),
      offset_dims=ints(d.get("offset_dims")),
      collapsed_slice_dims=ints(d.get("collapsed_slice_dims")),
      start_index_map=ints(d.get("start_index_map")),
      operand_batching_dims=ints(d.get("operand_batching_dims")),
      start_indices_batching_dims=ints(d.get("start_indices_batching_dims")),
      index_vector_dim=int(d.get("index_vector_dim", 0)),
      slice_sizes=ints(op.attr("slice_sizes")),
      indices_are_sorted=bool_attr(op, "indices_are_sorted")))]


def window_of(op, rank, sizes_name="window_dimensions"):
  sizes = ints(op.attr(sizes_name))
  strides = ints(op.attr("window_strides"), (1,) * rank)
  base = ints(op.attr("base_dilations"), (1,) * rank)
  wdil = ints(op.attr("window_dilations"), (1,) * rank)
  pads = pairs(op.attr("padding"), rank)
  return xla_data.Window(tuple(
      xla_data.WindowDimension(
          size=sizes[i], stride=strides[i], padding_low=pads[i][0],
          padding_high=pads[i][1], window_dilation=wdil[i],
          base_dilation=base[i])
      for i in range(rank)))
