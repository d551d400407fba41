"""The integer / float arithmetic that `quant_legalize` emits for uniform
quantized values: quantize, requantize, dequantize, and the integer
epilogue of quantized dot_general / convolution.

Every helper builds StableHLO ops with a `rewrite.Builder` on static-shaped
tensors. The formulas are those of the reference interpreter
(`interpreter/kernels_quantization.py`, which follows upstream's
`stablehlo-legalize-quant-to-math`), so a legalized program computes the
same storage integers as the interpreter does on the quantized program:

* quantize:   `convert(round_even(clamp(smin, x / scale + zp, smax)))`
  in f32 (f64 for an f64 expressed type);
* requantize: `x * (s_in / s_out) + (zp_out - zp_in * s_in / s_out)` in
  f32, clamped only for storage narrower than 32 bits, rounded to even;
* dequantize: `convert(x - zp) * scale`, the subtraction in i64;
* integer dot epilogue: `trunc(f32(acc) * f32(s_l * s_r / s_out))`
  (skipped when that combined scale is within 1e-3 of 1) plus the result
  zero point minus the zero-point correction, in wrapping i32.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.ops import typeutil as tu
from stablehlo._src.transforms import rewrite
import support

I32 = t.IntegerType(32)
I64 = t.IntegerType(64)
F32 = t.FloatType("f32")
F64 = t.FloatType("f64")


def wrap_i32(v: int) -> int:
  """`v` modulo 2^32 as a signed 32-bit value (i32 arithmetic wraps)."""
  return ((int(v) + 2**31) % 2**32) - 2**31


def compute_type(qt: t.QuantizedType) -> t.FloatType:
  """The float type of the quantization arithmetic: f64 for an f64
  expressed type, else f32."""
  return F64 if qt.expressed_type.name == "f64" else F32


def static_shape(v: core.Value) -> tuple[int, ...]:
  ty = v.type
  if not isinstance(ty, t.RankedTensorType) or not ty.has_static_shape:
    raise support.UnimplementedError(
        f"quantized types with dynamic shapes are not supported ({ty})")
  return tuple(ty.shape)


def tensor(shape, et) -> t.RankedTensorType:
  return t.RankedTensorType(tuple(shape), et)


class Emitter:
  """Builds ops for one replaced op (all at its location)."""

  def __init__(self, op: core.Operation):
    self.op = op
    self.b = rewrite.Builder(op.location)

  @property
  def ops(self) -> list[core.Operation]:
    return self.b.ops

  # -- constants -----------------------------------------------------------

  def splat(self, value, et: t.Type, shape) -> core.Value:
    arr = np.asarray(value).astype(runtime.numpy_dtype(et))
    return self.b.constant(arr.reshape(()), tensor(shape, et))

  def along(self, values: Sequence, et: t.Type, shape,
            axis: Optional[int]) -> core.Value:
    """One value per tensor (axis None: a splat), or one per index of
    `axis`, broadcast to `shape`."""
    vals = np.asarray(values).astype(runtime.numpy_dtype(et)).reshape(-1)
    if axis is None or len(set(vals.tolist())) == 1:
      return self.splat(vals[0], et, shape)
    vec = self.b.constant(vals, tensor((vals.size,), et))
    return self.broadcast(vec, shape, (axis,))

  # -- ops -----------------------------------------------------------------

  def unary(self, name: str, x: core.Value, et=None) -> core.Value:
    ty = x.type if et is None else tensor(static_shape(x), et)
    return self.b.one("stablehlo." + name, [x], ty)

  def binary(self, name: str, x: core.Value, y: core.Value) -> core.Value:
    return self.b.one("stablehlo." + name, [x, y], x.type)

  def convert(self, x: core.Value, et: t.Type) -> core.Value:
    if t.element_type_of(x.type) == et:
      return x
    return self.unary("convert", x, et)

  def clamp(self, lo, x: core.Value, hi) -> core.Value:
    et, shape = t.element_type_of(x.type), static_shape(x)
    return self.b.one("stablehlo.clamp", [self.splat(lo, et, shape), x,
                                          self.splat(hi, et, shape)], x.type)

  def broadcast(self, x: core.Value, shape, dims) -> core.Value:
    if tuple(static_shape(x)) == tuple(shape) and list(dims) == list(
        range(len(shape))):
      return x
    return self.b.one("stablehlo.broadcast_in_dim", [x], tensor(
        shape, t.element_type_of(x.type)), properties={
            "broadcast_dimensions": rewrite.i64_array(dims)})

  def transpose(self, x: core.Value, perm) -> core.Value:
    if list(perm) == list(range(len(perm))):
      return x
    shape = static_shape(x)
    return self.b.one("stablehlo.transpose", [x], tensor(
        [shape[p] for p in perm], t.element_type_of(x.type)), properties={
            "permutation": rewrite.i64_array(perm)})

  def pad(self, x: core.Value, value: core.Value, lo, hi) -> core.Value:
    shape = static_shape(x)
    out = [n + l + h for n, l, h in zip(shape, lo, hi)]
    return self.b.one("stablehlo.pad", [x, value], tensor(
        out, t.element_type_of(x.type)), properties={
            "edge_padding_low": rewrite.i64_array(lo),
            "edge_padding_high": rewrite.i64_array(hi),
            "interior_padding": rewrite.i64_array([0] * len(shape))})

  def reduce_sum(self, x: core.Value, dims) -> core.Value:
    """The (wrapping) sum of x over `dims`."""
    if not dims:
      return x
    et = t.element_type_of(x.type)
    shape = static_shape(x)
    scalar = tensor((), et)
    init = self.splat(0, et, ())
    block = core.Block([scalar, scalar])
    body = core.Operation("stablehlo.add", list(block.arguments), [scalar],
                          location=self.b.location)
    block.append(body)
    block.append(core.Operation("stablehlo.return", [body.results[0]], [],
                                location=self.b.location))
    out = [n for d, n in enumerate(shape) if d not in dims]
    return self.b.one("stablehlo.reduce", [x, init], tensor(out, et),
                      properties={"dimensions": rewrite.i64_array(
                          sorted(dims))},
                      regions=[core.Region([block])])

  def clone(self, op: core.Operation, operands, result_types,
            drop=()) -> core.Operation:
    """`op` with new operands / result types (no regions)."""
    if op.regions:
      raise support.UnimplementedError(
          f"{op.name}: quantized operands of an op with regions")
    attrs = {k: v for k, v in op.attributes.items() if k not in drop}
    props = {k: v for k, v in op.properties.items() if k not in drop}
    return self.b.op(op.name, operands, result_types, attributes=attrs,
                     properties=props)


# -- quantize / dequantize -----------------------------------------------------


def quantize(e: Emitter, x: core.Value, qt: t.QuantizedType) -> core.Value:
  """Float -> storage integers of `qt` (spec `quantize`)."""
  fdt = compute_type(qt)
  shape = static_shape(x)
  axis = qt.quantized_dimension
  if isinstance(t.element_type_of(x.type), t.ComplexType):
    x = e.unary("real", x, t.element_type_of(x.type).element_type)
  r = e.convert(x, fdt)
  r = e.binary("divide", r, e.along(qt.scales, fdt, shape, axis))
  if any(z != 0 for z in qt.zero_points):
    r = e.binary("add", r, e.along(qt.zero_points, fdt, shape, axis))
  smin, smax = tu.storage_range(qt)
  r = e.clamp(smin, r, smax)
  r = e.unary("round_nearest_even", r)
  return e.convert(r, qt.storage_type)


def dequantize(e: Emitter, x: core.Value, qt: t.QuantizedType,
               out_et: Optional[t.Type] = None) -> core.Value:
  """Storage integers -> `(x - zero_point) * scale` (spec `dequantize`)."""
  fdt = compute_type(qt)
  shape = static_shape(x)
  axis = qt.quantized_dimension
  if any(z != 0 for z in qt.zero_points):
    v = e.convert(x, I64)
    v = e.binary("subtract", v, e.along(qt.zero_points, I64, shape, axis))
  else:
    v = x
  v = e.convert(v, fdt)
  v = e.binary("multiply", v, e.along(qt.scales, fdt, shape, axis))
  return e.convert(v, out_et if out_et is not None else qt.expressed_type)


def hybrid_dequantize(e: Emitter, x: core.Value,
                      qt: t.QuantizedType) -> core.Value:
  """The weight dequantization of hybrid ops: `(f(x) - f(zp)) * scale`
  (no subtraction when every zero point is 0)."""
  fdt = compute_type(qt)
  shape = static_shape(x)
  axis = qt.quantized_dimension
  v = e.convert(x, fdt)
  if any(z != 0 for z in qt.zero_points):
    v = e.binary("subtract", v, e.along(qt.zero_points, fdt, shape, axis))
  v = e.binary("multiply", v, e.along(qt.scales, fdt, shape, axis))
  return e.convert(v, qt.expressed_type)


def requantize(e: Emitter, x: core.Value, src: t.QuantizedType,
               dst: t.QuantizedType) -> core.Value:
  """Storage of `src` -> storage of `dst`."""
  if src == dst:
    return x
  if (src.quantized_dimension is not None and dst.quantized_dimension
      is not None and src.quantized_dimension != dst.quantized_dimension):
    raise support.UnimplementedError(
        "uniform_quantize: cannot requantize while changing the quantization "
        "dimension")
  shape = static_shape(x)
  axis_type = dst if dst.quantized_dimension is not None else src
  n = len(axis_type.scales)

  def vec(values):
    return np.broadcast_to(np.asarray(values, np.float64), (n,))

  merged_scale = vec(src.scales) / vec(dst.scales)
  merged_zp = vec(dst.zero_points) - vec(src.zero_points) * merged_scale
  ms = merged_scale.astype(np.float32)
  mz = merged_zp.astype(np.float32)
  axis = axis_type.quantized_dimension
  out = e.binary("multiply", e.convert(x, F32), e.along(ms, F32, shape, axis))
  if np.any(mz != 0):
    out = e.binary("add", out, e.along(mz, F32, shape, axis))
  if dst.storage_type.width < 32:
    smin, smax = tu.storage_range(dst)
    out = e.clamp(smin, out, smax)
  out = e.unary("round_nearest_even", out)
  return e.convert(out, dst.storage_type)


def widened(qt: t.QuantizedType) -> t.QuantizedType:
  """`qt` with i32 storage and no storage bounds."""
  return t.QuantizedType(I32, qt.expressed_type, qt.scales, qt.zero_points,
                         qt.quantized_dimension)


# -- integer dot / convolution epilogue ----------------------------------------


def _scale_trunc(e: Emitter, v: core.Value, f: np.float32) -> core.Value:
  """`trunc_i32(f32(v) * f)`, saturating."""
  shape = static_shape(v)
  p = e.binary("multiply", e.convert(v, F32), e.splat(f, F32, shape))
  return e.convert(p, I32)


def finish_integer_dot(e: Emitter, acc: core.Value,
                       offset: Optional[core.Value], ql, qr, qo
                       ) -> core.Value:
  """i32 accumulator + zero-point correction -> result storage."""
  shape = static_shape(acc)
  cs = ql.scales[0] * qr.scales[0] / qo.scales[0]
  if abs(cs - 1.0) > 0.001:
    f = np.float32(cs)
    acc = _scale_trunc(e, acc, f)
    if offset is not None:
      offset = _scale_trunc(e, offset, f)
  res_zp = qo.zero_points[0] if qo.quantized_dimension is None else 0
  if offset is not None:
    combined = e.binary("subtract", e.splat(wrap_i32(res_zp), I32, shape),
                        offset)
    acc = e.binary("add", acc, combined)
  elif res_zp != 0:
    acc = e.binary("add", acc, e.splat(wrap_i32(res_zp), I32, shape))
  return e.convert(acc, qo.storage_type)


def scaled(e: Emitter, x: core.Value, k: int) -> core.Value:
  """`k * x` in wrapping i32."""
  return e.binary("multiply", x, e.splat(wrap_i32(k), I32, static_shape(x)))
