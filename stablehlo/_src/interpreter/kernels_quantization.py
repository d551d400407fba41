"""Quantization in the interpreter: uniform_quantize, uniform_dequantize and
the execution of every other op on quantized tensors.

Runtime values of quantized tensors hold their storage integers. The spec
("Execution semantics of quantized operation") leaves the arithmetic of
quantized ops to the implementation; we follow the reference interpreter
upstream, which first lowers quantized programs to integer / float math
(StableHLO's `stablehlo-legalize-quant-to-math` pass), so that programs whose
expected values were recorded with it reproduce bit for bit:

* uniform_quantize (float -> quantized) computes `x / scale + zero_point` in
  f32, clamps to [storage_min, storage_max] and rounds half to even;
  quantized -> quantized requantizes as `x * (s_in / s_out) + (zp_out - zp_in
  * s_in / s_out)` in f32 (clamped only for storage narrower than 32 bits).
* uniform_dequantize computes `(x - zero_point) * scale` in f32.
* add with all-quantized per-tensor types requantizes both operands to the
  result type in i32 and adds in integers.
* dot_general / dot / convolution with quantized lhs, rhs and result
  ("static" quantization) accumulate the storage integers in i32 and apply
  the zero-point corrections and the combined scale `s_lhs * s_rhs / s_res`
  in f32 (truncating back to i32); convolution takes this path only in the
  2-D / 3-D NHWC / NCHW layouts with zero rhs zero points and no lhs
  dilation, like upstream, else the dequantize fallback below.
* hybrid dot_general / convolution (float lhs, quantized rhs, float result)
  dequantize the rhs and run the float op (spec `hybrid_dequantize_then_op`).
* data-movement and control-flow ops (reshape, transpose, slice, gather,
  concatenate, pad, select / maximum / minimum with equal types, while, ...)
  run on the storage integers directly.
* every other op dequantizes its quantized operands, runs the float kernel
  and quantizes its quantized results (spec `dequantize_op_quantize`).

The float kernels see a lightweight view of the op (`OpView`) whose operand
and result types carry the expressed element types; the IR is never
mutated. The evaluator calls `quantized_kernel_hook` once per op that has
quantized operands or results.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from stablehlo._src.interpreter import evaluator
from stablehlo._src.interpreter import kernels_linalg as linalg
from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support

# --- quantization parameters --------------------------------------------------


def _qtype(ty) -> Optional[t.QuantizedType]:
  et = t.element_type_of(ty)
  return et if isinstance(et, t.QuantizedType) else None


def _float_dtype(qt: t.QuantizedType) -> np.dtype:
  """The dtype of the quantization arithmetic: f32 (as upstream), f64 for
  an f64 expressed type."""
  if qt.expressed_type.name == "f64":
    return np.dtype(np.float64)
  return np.dtype(np.float32)


def _along_axis(values, qt: t.QuantizedType, ndim: int, dtype) -> np.ndarray:
  """Per-tensor parameters as a scalar, per-axis ones shaped to broadcast
  along the quantization dimension of an `ndim`-rank array."""
  arr = np.asarray(values, dtype=dtype)
  if qt.quantized_dimension is None:
    return arr.reshape(())
  shape = [1] * ndim
  shape[qt.quantized_dimension] = arr.size
  return arr.reshape(shape)


def _to_storage(r: np.ndarray, qt: t.QuantizedType) -> np.ndarray:
  """Rounded float values -> storage integers, saturating like a float ->
  int `convert` (NaN -> 0)."""
  st = qt.storage_type
  lo, hi = linalg.int_range(st)
  r = np.nan_to_num(np.asarray(r, dtype=np.float64), nan=0.0, posinf=hi,
                    neginf=lo)
  return runtime.wrap_to(np.clip(r, lo, hi).astype(np.int64), st)


def _storage_ints(x: np.ndarray) -> np.ndarray:
  return np.asarray(x).astype(np.int64)


def dequantize(x: np.ndarray, qt: t.QuantizedType,
               out_dtype: Optional[np.dtype] = None) -> np.ndarray:
  """Spec `dequantize`: `(x - zero_point) * scale`."""
  fdt = _float_dtype(qt)
  v = _storage_ints(x) - _along_axis(qt.zero_points, qt, np.ndim(x), np.int64)
  out = v.astype(fdt) * _along_axis(qt.scales, qt, np.ndim(x), fdt)
  dt = out_dtype if out_dtype is not None else runtime.numpy_dtype(
      qt.expressed_type)
  return out.astype(dt)


def quantize(x: np.ndarray, qt: t.QuantizedType) -> np.ndarray:
  """Spec `quantize`: `round_nearest_even(clamp(min, x / scale +
  zero_point, max))` computed in f32, stored as integers."""
  fdt = _float_dtype(qt)
  x = np.asarray(x)
  if x.dtype.kind == "c":
    x = x.real
  xf = x.astype(fdt)
  r = xf / _along_axis(qt.scales, qt, xf.ndim, fdt)
  r = r + _along_axis(qt.zero_points, qt, xf.ndim, fdt)
  smin, smax = tu.storage_range(qt)
  r = np.clip(r, fdt.type(smin), fdt.type(smax))
  return _to_storage(np.rint(r), qt)


def requantize(x: np.ndarray, src: t.QuantizedType,
               dst: t.QuantizedType) -> np.ndarray:
  """Storage of `src` -> storage of `dst` (uniform_quantize on quantized
  values): `x * merged_scale + merged_zp` in f32, rounded half to even.
  Clamped to dst's storage range when that is narrower than 32 bits."""
  if src == dst:
    return runtime.wrap_to(_storage_ints(x), dst.storage_type)
  if (src.quantized_dimension is not None and dst.quantized_dimension
      is not None and src.quantized_dimension != dst.quantized_dimension):
    raise support.UnimplementedError(
        "uniform_quantize: cannot requantize while changing the quantization "
        "dimension")
  ndim = np.ndim(x)
  axis_type = dst if dst.quantized_dimension is not None else src
  n = len(axis_type.scales)
  s_in = np.broadcast_to(np.asarray(src.scales, np.float64), (n,))
  s_out = np.broadcast_to(np.asarray(dst.scales, np.float64), (n,))
  z_in = np.broadcast_to(np.asarray(src.zero_points, np.float64), (n,))
  z_out = np.broadcast_to(np.asarray(dst.zero_points, np.float64), (n,))
  merged_scale = s_in / s_out
  merged_zp = z_out - z_in * merged_scale
  fdt = np.dtype(np.float32)
  ms = _along_axis(merged_scale, axis_type, ndim, fdt)
  mz = _along_axis(merged_zp, axis_type, ndim, fdt)
  out = _storage_ints(x).astype(fdt) * ms
  if np.any(mz != 0):
    out = out + mz
  if dst.storage_type.width < 32:
    smin, smax = tu.storage_range(dst)
    out = np.clip(out, fdt.type(smin), fdt.type(smax))
  return _to_storage(np.rint(out), dst)


# --- uniform_quantize / uniform_dequantize kernels ----------------------------


@registry.interpreter_kernel("stablehlo.uniform_quantize")
def _uniform_quantize(ctx, op, args):
  (x,) = args
  dst = _qtype(op.results[0].type)
  src = _qtype(op.operands[0].type)
  if dst is None:
    raise support.InvalidArgumentError(
        "uniform_quantize: result must be a quantized tensor")
  if src is not None:
    return requantize(x, src, dst)
  return quantize(x, dst)


@registry.interpreter_kernel("stablehlo.uniform_dequantize")
def _uniform_dequantize(ctx, op, args):
  (x,) = args
  src = _qtype(op.operands[0].type)
  return dequantize(x, src, runtime.numpy_dtype(op.results[0].type))


# --- the op view given to float kernels ---------------------------------------


def expressed_type(ty: t.Type) -> t.Type:
  """`ty` with quantized element types replaced by their expressed types."""
  if isinstance(ty, t.RankedTensorType):
    qt = _qtype(ty)
    if qt is not None:
      return t.RankedTensorType(ty.shape, qt.expressed_type, ty.encoding)
    return ty
  if isinstance(ty, t.UnrankedTensorType):
    qt = _qtype(ty)
    return t.UnrankedTensorType(qt.expressed_type) if qt else ty
  if isinstance(ty, t.TupleType):
    return t.TupleType(tuple(expressed_type(x) for x in ty.types))
  return ty


class OpView:
  """An op as a kernel sees it, with other operand / result types.

  Everything else (name, attributes, regions, location) is the wrapped op's.
  """

  __slots__ = ("op", "operands", "results")

  def __init__(self, op, operand_types, result_types):
    self.op = op
    self.operands = [core.Value(ty, self, i)
                     for i, ty in enumerate(operand_types)]
    self.results = [core.Value(ty, self, i)
                    for i, ty in enumerate(result_types)]

  def __getattr__(self, name):
    return getattr(self.op, name)

  @property
  def operand_types(self):
    return [v.type for v in self.operands]

  @property
  def result_types(self):
    return [v.type for v in self.results]

  @property
  def result(self):
    return self.results[0]


def _expressed_view(op) -> OpView:
  return OpView(op, [expressed_type(v.type) for v in op.operands],
                [expressed_type(v.type) for v in op.results])


# --- execution strategies -----------------------------------------------------


def _dequantize_args(op, args):
  out = []
  for v, x in zip(op.operands, args):
    qt = _qtype(v.type)
    out.append(dequantize(x, qt) if qt is not None and isinstance(
        x, np.ndarray) else x)
  return out


def _quantize_results(op, out):
  single = type(out) is not list
  outs = [out] if single else out
  res = []
  for v, y in zip(op.results, outs):
    qt = _qtype(v.type)
    res.append(quantize(y, qt) if qt is not None else y)
  return res[0] if single else res


def dequantize_op_quantize(op, kernel: Callable) -> Callable:
  """Spec `dequantize_op_quantize` (also `dequantize_compare`,
  `dequantize_select_quantize` and the batch_norm variants)."""
  view = _expressed_view(op)

  def run(ctx, _op, args):
    return _quantize_results(op, kernel(ctx, view, _dequantize_args(op, args)))

  return run


def _hybrid(op, kernel: Callable) -> Callable:
  """Spec `hybrid_dequantize_then_op`: float lhs, quantized rhs."""
  view = _expressed_view(op)
  rq = _qtype(op.operands[1].type)

  def run(ctx, _op, args):
    lhs, rhs = args[0], args[1]
    fdt = runtime.numpy_dtype(rq.expressed_type)
    rhs_f = _hybrid_dequantize(rhs, rq).astype(fdt)
    return kernel(ctx, view, [lhs, rhs_f] + list(args[2:]))

  return run


def _hybrid_dequantize(x, qt):
  """Upstream's weight dequantization for hybrid ops: `(f32(x) - f32(zp))
  * scale` (the subtraction skipped when all zero points are 0)."""
  fdt = _float_dtype(qt)
  v = _storage_ints(x).astype(fdt)
  if any(z != 0 for z in qt.zero_points):
    v = v - _along_axis(qt.zero_points, qt, v.ndim, fdt)
  return v * _along_axis(qt.scales, qt, v.ndim, fdt)


def _native(op, kernel):
  return kernel


# --- add ----------------------------------------------------------------------

_I32 = t.IntegerType(32)


def _requantize_i32(x, src: t.QuantizedType, dst: t.QuantizedType):
  """`requantize` into i32 (no clamping), as int64 values."""
  if src == dst:
    return _storage_ints(x)
  wide = t.QuantizedType(_I32, dst.expressed_type, dst.scales,
                         dst.zero_points, dst.quantized_dimension)
  return _storage_ints(requantize(x, src, wide))


def _add(op, kernel):
  ql, qr, qo = (_qtype(op.operands[0].type), _qtype(op.operands[1].type),
                _qtype(op.results[0].type))
  if ql is None or qr is None or qo is None:
    return dequantize_op_quantize(op, kernel)
  per_axis = any(q.quantized_dimension is not None for q in (ql, qr, qo))
  if per_axis:
    if not (ql == qr == qo and qo.storage_type.width == 32):
      return dequantize_op_quantize(op, kernel)

    def run_axis(ctx, _op, args):
      s = _storage_ints(args[0]) + _storage_ints(args[1])
      s = s - _along_axis(qo.zero_points, qo, s.ndim, np.int64)
      return runtime.wrap_to(s, qo.storage_type)

    return run_axis

  def run(ctx, _op, args):
    a = runtime.wrap_to(_requantize_i32(args[0], ql, qo), _I32)
    b = runtime.wrap_to(_requantize_i32(args[1], qr, qo), _I32)
    s = runtime.wrap_to(a.astype(np.int64) + b.astype(np.int64) -
                        qo.zero_points[0], _I32).astype(np.int64)
    if qo.storage_type.width != 32:
      smin, smax = tu.storage_range(qo)
      s = np.clip(s, smin, smax)
    return runtime.wrap_to(s, qo.storage_type)

  return run


def _same_types_native(op, kernel):
  """maximum / minimum / select: on the storage integers when every
  quantized operand and the result share one per-tensor type, else
  dequantize -> op -> quantize."""
  qts = {_qtype(v.type) for v in list(op.operands) + list(op.results)}
  qts.discard(None)
  if len(qts) == 1 and next(iter(qts)).quantized_dimension is None:
    return kernel
  if op.name == "stablehlo.select" and len(qts) == 1:
    return kernel
  return dequantize_op_quantize(op, kernel)


# --- dot_general / convolution ------------------------------------------------


def _is_static(ql, qr, qo) -> bool:
  if ql is None or ql.quantized_dimension is not None:
    return False
  if qr is None or qo is None:
    return False
  return (qr.quantized_dimension is None) == (qo.quantized_dimension is None)


def _is_hybrid(ql, qr, qo) -> bool:
  return ql is None and qr is not None and qo is None


def _combined_scale(ql, qr, qo) -> float:
  return ql.scales[0] * qr.scales[0] / qo.scales[0]


def _finish_integer_dot(res: np.ndarray, zp_offset, ql, qr, qo):
  """i32 accumulation + zero-point offset -> result storage (upstream's
  lowering: scale both parts by the combined scale in f32, truncating)."""
  res = runtime.wrap_to(res, _I32).astype(np.int64)
  cs = _combined_scale(ql, qr, qo)
  if zp_offset is not None:
    zp_offset = runtime.wrap_to(zp_offset, _I32).astype(np.int64)
  if abs(cs - 1.0) > 0.001:
    f = np.float32(cs)
    res = _trunc_i32(res.astype(np.float32) * f)
    if zp_offset is not None:
      zp_offset = _trunc_i32(np.asarray(zp_offset).astype(np.float32) * f)
  res_zp = qo.zero_points[0] if qo.quantized_dimension is None else 0
  combined = np.int64(res_zp)
  if zp_offset is not None:
    combined = runtime.wrap_to(combined - zp_offset, _I32).astype(np.int64)
  out = runtime.wrap_to(res + combined, _I32)
  return runtime.wrap_to(out.astype(np.int64), qo.storage_type)


def _trunc_i32(x: np.ndarray) -> np.ndarray:
  lo, hi = -(2**31), 2**31 - 1
  x = np.nan_to_num(np.trunc(np.asarray(x, np.float64)), nan=0.0, posinf=hi,
                    neginf=lo)
  return np.clip(x, lo, hi).astype(np.int64)


def _dot_general_q(op, kernel):
  ql, qr, qo = (_qtype(op.operands[0].type), _qtype(op.operands[1].type),
                _qtype(op.results[0].type))
  if _is_hybrid(ql, qr, qo):
    return _hybrid(op, kernel)
  if not _is_static(ql, qr, qo):
    return dequantize_op_quantize(op, kernel)
  if op.name == "stablehlo.dot":
    rank = len(op.operands[0].type.shape)
    dims = ((), (), (rank - 1,), (0,))
  else:
    dims = linalg.dot_dims(op)
  lty, rty = op.operands[0].type, op.operands[1].type
  zl = ql.zero_points[0]
  zr = qr.zero_points[0] if qr.quantized_dimension is None else 0

  def run(ctx, _op, args):
    lhs, rhs = args
    res = linalg.dot_general_array(lhs, rhs, lty, rty, _I32, dims)
    res = res.astype(np.int64)
    lb, rb, lc, rc = (list(d) for d in dims)
    lfree = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    nb = len(lb)
    offset = None
    if zr != 0:
      s = _storage_ints(lhs).sum(axis=tuple(lc))
      keep = [d for d in range(lhs.ndim) if d not in lc]
      s = s.transpose([keep.index(d) for d in lb + lfree])
      offset = zr * s.reshape(s.shape + (1,) * len(rfree))
    if zl != 0:
      s = _storage_ints(rhs).sum(axis=tuple(rc))
      keep = [d for d in range(rhs.ndim) if d not in rc]
      s = s.transpose([keep.index(d) for d in rb + rfree])
      s = s.reshape(s.shape[:nb] + (1,) * len(lfree) + s.shape[nb:])
      offset = zl * s if offset is None else offset + zl * s
    if zl != 0 and zr != 0:
      k = math.prod(lhs.shape[d] for d in lc)
      offset = offset - zl * zr * k
    if offset is not None:
      offset = np.broadcast_to(offset, res.shape)
    return _finish_integer_dot(res, offset, ql, qr, qo)

  return run


_CONV_LAYOUTS = {
    # (input, kernel, output) dims -> ok: b, f, spatial / i, o, spatial.
    ((0, 3, (1, 2)), (2, 3, (0, 1)), (0, 3, (1, 2))),
    ((0, 1, (2, 3)), (1, 0, (2, 3)), (0, 1, (2, 3))),
    ((0, 4, (1, 2, 3)), (3, 4, (0, 1, 2)), (0, 4, (1, 2, 3))),
    ((0, 1, (2, 3, 4)), (0, 1, (2, 3, 4)), (0, 1, (2, 3, 4))),
}


def _conv_integer_ok(op, cfg: linalg.ConvConfig, qr, qo) -> bool:
  """Upstream's conditions for the integer convolution lowering."""
  if qr.quantized_dimension is None:
    if qr.zero_points[0] != 0:
      return False
  else:
    if any(z != 0 for z in tuple(qr.zero_points) + tuple(qo.zero_points)):
      return False
    if qr.quantized_dimension != len(op.operands[1].type.shape) - 1:
      return False
    ratios = [so / sr for so, sr in zip(qo.scales, qr.scales)]
    if any(abs((x - ratios[0]) / ratios[0]) > 0.001 for x in ratios):
      return False
  if any(d != 1 for d in cfg.lhs_dil):
    return False
  d = cfg.dims
  key = ((d.ib, d.if_, tuple(d.isp)), (d.kif, d.kof, tuple(d.ksp)),
         (d.ob, d.of_, tuple(d.osp)))
  return key in _CONV_LAYOUTS


def _convolution_q(op, kernel):
  ql, qr, qo = (_qtype(op.operands[0].type), _qtype(op.operands[1].type),
                _qtype(op.results[0].type))
  if _is_hybrid(ql, qr, qo):
    return _hybrid(op, kernel)
  if op.name != "stablehlo.convolution" or not _is_static(ql, qr, qo):
    return dequantize_op_quantize(op, kernel)
  pad = op.attr("padding")
  rank = len(op.operands[0].type.shape)
  cfg = linalg.ConvConfig(op, None if pad is None else tu.int_matrix(pad),
                          rank)
  if not _conv_integer_ok(op, cfg, qr, qo):
    return dequantize_op_quantize(op, kernel)
  zl = ql.zero_points[0]
  lty, rty = op.operands[0].type, op.operands[1].type
  padding = cfg.padding
  cfg.padding = [(0, 0)] * len(padding)

  def run(ctx, _op, args):
    lhs, rhs = args
    lhs = _pad_with(lhs, cfg.dims.isp, padding, zl)
    res = linalg.convolution_array(lhs, rhs, lty, rty, _I32, cfg)
    res = res.astype(np.int64)
    offset = None
    if zl != 0:
      d = cfg.dims
      s = _storage_ints(rhs).sum(axis=tuple(d.ksp) + (d.kif,))
      shape = [1] * res.ndim
      shape[d.of_] = s.size
      offset = np.broadcast_to(zl * s.reshape(shape), res.shape)
    return _finish_integer_dot(res, offset, ql, qr, qo)

  return run


def _pad_with(x: np.ndarray, dims, padding, value) -> np.ndarray:
  """Edge-pads (negative: crops) the spatial `dims` of x with `value`."""
  if all(p == (0, 0) for p in padding):
    return x
  index = [slice(None)] * x.ndim
  pads = [(0, 0)] * x.ndim
  for dim, (lo, hi) in zip(dims, padding):
    size = x.shape[dim]
    index[dim] = slice(max(-lo, 0), size + min(hi, 0))
    pads[dim] = (max(lo, 0), max(hi, 0))
  x = x[tuple(index)]
  return np.pad(x, pads, constant_values=x.dtype.type(value))


# --- the hook -----------------------------------------------------------------

# Ops the spec defines through dequantize -> float op -> quantize.
_ARITHMETIC = frozenset("stablehlo." + n for n in (
    "abs", "add", "atan2", "batch_norm_grad", "batch_norm_inference",
    "batch_norm_training", "cbrt", "ceil", "cholesky", "clamp", "compare",
    "convert", "cosine", "divide", "exponential", "exponential_minus_one",
    "floor", "log", "log_plus_one", "logistic", "multiply", "negate", "power",
    "reduce_precision", "remainder", "round_nearest_afz",
    "round_nearest_even", "rsqrt", "sign", "sine", "sqrt", "subtract", "tan",
    "tanh", "triangular_solve"))

_SPECIAL = {
    "stablehlo.uniform_quantize": _native,
    "stablehlo.uniform_dequantize": _native,
    "stablehlo.add": _add,
    "stablehlo.maximum": _same_types_native,
    "stablehlo.minimum": _same_types_native,
    "stablehlo.select": _same_types_native,
    "stablehlo.dot_general": _dot_general_q,
    "stablehlo.dot": _dot_general_q,
    "stablehlo.convolution": _convolution_q,
    "stablehlo.dynamic_conv": _convolution_q,
}


def quantized_kernel(op, kernel: Callable) -> Callable:
  """The kernel to run for `op`, which has quantized operands or results.
  Ops without arithmetic (data movement, control flow, collectives, checks)
  run on the storage integers as they are."""
  special = _SPECIAL.get(op.name)
  if special is not None:
    return special(op, kernel)
  if op.name in _ARITHMETIC:
    return dequantize_op_quantize(op, kernel)
  return kernel


evaluator.quantized_kernel_hook = quantized_kernel
