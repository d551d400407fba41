"""Kernels that change element types or reinterpret bits: `convert`,
`bitcast_convert` and `reduce_precision` (spec sections of those names).

Bit patterns are little-endian, as the spec's bitcast example shows: when
one element splits into several, element 0 of the new trailing dimension
holds the least significant bits (for i1, bit k of the word is element k).
"""

from __future__ import annotations

import sys

import numpy as np

from stablehlo._src.interpreter import kernels_elementwise_common as C
from stablehlo._src.ops import registry
import support


@registry.interpreter_kernel("stablehlo.convert")
def _convert(ctx, op, args):
  """spec: convert (the conversions are described in
  `common.convert_array`)."""
  return C.convert_array(args[0], C.operand_et(op), C.result_et(op))


def bitcast_array(x: np.ndarray, src, dst) -> np.ndarray:
  """spec: bitcast_convert from element type `src` to `dst`."""
  x = np.asarray(x)
  ws, wd = C.width(src), C.width(dst)
  if C.kind(src) == C.COMPLEX or C.kind(dst) == C.COMPLEX:
    if C.kind(src) != C.kind(dst):
      raise support.InvalidArgumentError(
          f"cannot bitcast between {src} and {dst}")
    return _bitcast_bytes(x, ws, wd, C.dtype(dst))
  if (ws % 8 == 0 and wd % 8 == 0 and ws == C.dtype(src).itemsize * 8 and
      wd == C.dtype(dst).itemsize * 8 and C.kind(src) != C.BOOL and
      C.kind(dst) != C.BOOL):
    return _bitcast_bytes(x, ws, wd, C.dtype(dst))
  u = C.to_bits(x, src)
  if wd == ws:
    return C.from_bits(u, dst)
  if wd < ws:
    k = ws // wd
    shifts = (np.arange(k, dtype=np.uint64) * np.uint64(wd))
    parts = (u[..., None] >> shifts) & np.uint64((1 << wd) - 1)
    return C.from_bits(parts, dst)
  k = wd // ws
  if x.shape[-1:] != (k,):
    raise support.InvalidArgumentError(
        f"bitcast of {x.shape} {src} to {dst} needs a last dimension of {k}")
  shifts = (np.arange(k, dtype=np.uint64) * np.uint64(ws))
  word = np.bitwise_or.reduce(u << shifts, axis=-1)
  return C.from_bits(word, dst)


def _bitcast_bytes(x, ws: int, wd: int, dt: np.dtype) -> np.ndarray:
  """Reinterpretation of whole bytes through a numpy view."""
  if sys.byteorder != "little":
    raise support.UnimplementedError(
        "bitcast_convert on a big-endian host")
  x = np.ascontiguousarray(x).reshape(np.shape(x))  # keeps rank 0
  if ws == wd:
    return x.view(dt).reshape(x.shape)
  if wd < ws:
    return x.reshape(x.shape + (1,)).view(dt).copy()
  k = wd // ws
  if x.shape[-1:] != (k,):
    raise support.InvalidArgumentError(
        f"bitcast of {x.shape} to {dt} needs a last dimension of {k}")
  return x.view(dt).reshape(x.shape[:-1]).copy()


@registry.interpreter_kernel("stablehlo.bitcast_convert")
def _bitcast_convert(ctx, op, args):
  return bitcast_array(args[0], C.operand_et(op), C.result_et(op))


def reduce_precision_array(x: np.ndarray, et, exponent_bits: int,
                           mantissa_bits: int) -> np.ndarray:
  """spec: reduce_precision - round the significand to `mantissa_bits`
  (ties to even), then flush exponents beyond `exponent_bits` to signed
  zero / infinity, on the bit pattern. NaN stays NaN (infinity when no
  mantissa bits remain, as upstream)."""
  w = C.width(et)
  p, _ = C.float_precision(et)
  src_m = p - 1
  src_e = w - src_m - 1
  u = C.to_bits(x, et)
  one = np.uint64(1)
  if mantissa_bits < src_m:
    d = src_m - mantissa_bits
    last = np.uint64(1 << d)
    base_bias = np.uint64((1 << (d - 1)) - 1)
    x_last = (u & last) >> np.uint64(d)
    u = (u + x_last + base_bias) & ~(last - one)
  if exponent_bits < src_e:
    sign_mask = np.uint64(1 << (w - 1))
    exp_mask = np.uint64(((1 << src_e) - 1) << src_m)
    bias = (1 << (src_e - 1)) - 1
    reduced_bias = (1 << (exponent_bits - 1)) - 1
    max_e = np.uint64((bias + reduced_bias) << src_m)
    min_e = np.uint64(max(bias - reduced_bias, 0) << src_m)
    xe = u & exp_mask
    signed_zero = u & sign_mask
    signed_inf = signed_zero | exp_mask
    u = np.where(xe > max_e, signed_inf, u)
    if bias - reduced_bias >= 0:
      u = np.where(xe <= min_e, signed_zero, u)
  r = C.from_bits(u, et)
  nan = np.isnan(C.upcast(x, et))
  if np.any(nan):
    fill = x if mantissa_bits > 0 else np.full(
        np.shape(x), np.inf).astype(C.dtype(et))
    r = np.where(nan, fill, r)
  return r


@registry.interpreter_kernel("stablehlo.reduce_precision")
def _reduce_precision(ctx, op, args):
  et = C.operand_et(op)
  if C.kind(et) != C.FLOAT:
    raise support.InvalidArgumentError(
        f"reduce_precision needs a float type, got {et}")
  eb = int(op.attr("exponent_bits").value)
  mb = int(op.attr("mantissa_bits").value)
  return reduce_precision_array(args[0], et, eb, mb)
