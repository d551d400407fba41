"""Element types <-> numpy dtypes, dense literal decoding and number spelling.

Shared by the parser (building `DenseElementsAttr` arrays from `dense<...>`
literals and hex blobs) and the printer (spelling floats the way MLIR's
`printFloatValue` does, choosing hex blobs for large constants).
"""

from __future__ import annotations

import decimal
import math
from typing import Optional

import ml_dtypes
import numpy as np

from stablehlo._src.ir import types as t

# MLIR prints a non-splat dense attribute as a hex blob above this many
# elements (the default of `--mlir-print-elementsattrs-with-hex-if-larger`).
HEX_THRESHOLD = 100

_FLOAT_DTYPES = {
    "f4E2M1FN": ml_dtypes.float4_e2m1fn,
    "f6E2M3FN": ml_dtypes.float6_e2m3fn,
    "f6E3M2FN": ml_dtypes.float6_e3m2fn,
    "f8E3M4": ml_dtypes.float8_e3m4,
    "f8E4M3": ml_dtypes.float8_e4m3,
    "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz,
    "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
    "bf16": ml_dtypes.bfloat16,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "tf32": np.float32,  # no numpy tf32; stored widened (documented limit)
}

# Significand precision in bits (APFloat `precision`, implicit bit included).
_FLOAT_PRECISION = {
    "f4E2M1FN": 2, "f6E2M3FN": 4, "f6E3M2FN": 3, "f8E3M4": 5, "f8E4M3": 4,
    "f8E4M3FN": 4, "f8E4M3FNUZ": 4, "f8E4M3B11FNUZ": 4, "f8E5M2": 3,
    "f8E5M2FNUZ": 3, "f8E8M0FNU": 1, "bf16": 8, "f16": 11, "f32": 24,
    "f64": 53, "tf32": 11,
}

# Bit width of each float type's encoding (the width of its hex spelling).
FLOAT_BITS = {
    "f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6, "bf16": 16, "f16": 16,
    "f32": 32, "f64": 64, "tf32": 19,
}

_INT_DTYPES = {
    (1, False): np.bool_, (2, False): ml_dtypes.int2, (4, False): ml_dtypes.int4,
    (8, False): np.int8, (16, False): np.int16, (32, False): np.int32,
    (64, False): np.int64, (2, True): ml_dtypes.uint2,
    (4, True): ml_dtypes.uint4, (8, True): np.uint8, (16, True): np.uint16,
    (32, True): np.uint32, (64, True): np.uint64,
}


def float_bits(name: str) -> int:
  return FLOAT_BITS.get(name, 8)


def storage_type(element_type: t.Type) -> t.Type:
  """The type whose values a dense attribute stores (quantized -> storage)."""
  if isinstance(element_type, t.QuantizedType):
    return element_type.storage_type
  return element_type


def numpy_dtype(element_type: t.Type) -> Optional[np.dtype]:
  """The numpy dtype holding values of `element_type`, or None if none."""
  et = storage_type(element_type)
  if isinstance(et, t.FloatType):
    dt = _FLOAT_DTYPES.get(et.name)
    return np.dtype(dt) if dt is not None else None
  if isinstance(et, t.IntegerType):
    if et.unsigned and et.width == 1:
      return np.dtype(np.bool_)
    dt = _INT_DTYPES.get((et.width, et.unsigned))
    return np.dtype(dt) if dt is not None else None
  if isinstance(et, t.IndexType):
    return np.dtype(np.int64)
  if isinstance(et, t.ComplexType):
    inner = et.element_type
    if isinstance(inner, t.FloatType) and inner.name == "f32":
      return np.dtype(np.complex64)
    if isinstance(inner, t.FloatType) and inner.name == "f64":
      return np.dtype(np.complex128)
  return None


def int_range(et: t.IntegerType) -> tuple[int, int]:
  """The accepted literal range: MLIR takes signed or unsigned spellings."""
  if et.width == 1:
    return 0, 1
  return -(1 << (et.width - 1)), (1 << et.width) - 1


def wrap_int(value: int, et: t.IntegerType) -> int:
  """Reinterprets `value` (already range-checked) in the dtype's signedness."""
  if et.width == 1:
    return value
  mask = (1 << et.width) - 1
  value &= mask
  if not et.unsigned and value >> (et.width - 1):
    value -= 1 << et.width
  return value


def float_from_bits(bits: int, ft: t.FloatType):
  """A numpy scalar of type `ft` with the raw bit pattern `bits`."""
  dtype = numpy_dtype(ft)
  width = dtype.itemsize * 8
  uint = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
  return np.array([bits], dtype=uint).view(dtype)[0]


def float_to_bits(value, ft: t.FloatType) -> int:
  dtype = numpy_dtype(ft)
  arr = np.array([value], dtype=dtype)
  width = dtype.itemsize * 8
  uint = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
  return int(arr.view(uint)[0])


def decode_hex_blob(data: bytes, element_type: t.Type, shape: tuple
                    ) -> Optional[np.ndarray]:
  """Decodes a `dense<"0x...">` blob (little-endian, row-major; i1 one byte
  per element; complex interleaved). A blob of one element is a splat.
  Returns None when the size matches neither the full tensor nor a splat."""
  dtype = numpy_dtype(element_type)
  if dtype is None:
    return None
  count = int(np.prod(shape, dtype=np.int64)) if shape else 1
  itemsize = dtype.itemsize
  if len(data) == count * itemsize:
    n = count
  elif len(data) == itemsize:
    n = 1
  else:
    return None
  raw = np.frombuffer(data, dtype=np.uint8)
  if dtype == np.bool_:
    arr = raw != 0
  else:
    arr = raw.view(dtype.newbyteorder("<")).astype(dtype)
  if n == 1 and count != 1:
    return np.broadcast_to(arr, shape).copy()
  return arr.reshape(shape)


def encode_hex_blob(array: np.ndarray) -> str:
  a = np.ascontiguousarray(array)
  if a.dtype == np.bool_:
    data = a.astype(np.uint8).tobytes()
  else:
    data = a.astype(a.dtype.newbyteorder("<")).tobytes()
  return "0x" + data.hex().upper()


def _decimal_digits(value: float, digits: int) -> tuple[str, int]:
  """`value` (> 0, finite) rounded half-up to `digits` significant digits,
  as APFloat::toString rounds its exact decimal expansion.

  Returns (digit string without trailing zeros, exponent of its last digit).
  """
  with decimal.localcontext() as ctx:
    ctx.prec = 1100  # exact for every binary64 value
    d = decimal.Decimal(value)
    msd = d.adjusted()
    q = d.scaleb(digits - 1 - msd).quantize(decimal.Decimal(1),
                                             rounding=decimal.ROUND_HALF_UP)
    ds = str(int(q))
  if len(ds) > digits:  # rounded up to the next power of ten
    msd += 1
    ds = ds[:digits]
  ds = ds.rstrip("0") or "0"
  return ds, msd - (len(ds) - 1)


def _format_exponential6(value: float) -> str:
  """APFloat::toString(precision=6, padding=0, TruncateZero=false)."""
  if value == 0:
    return ("-" if math.copysign(1.0, value) < 0 else "") + "0.000000e+00"
  sign = "-" if value < 0 else ""
  ds, exp = _decimal_digits(abs(value), 6)
  e = exp + len(ds) - 1
  return (f"{sign}{ds[0]}.{ds[1:].ljust(6, '0')}e"
          f"{'+' if e >= 0 else '-'}{abs(e):02d}")


def apfloat_to_string(value: float, precision_bits: int) -> str:
  """llvm::APFloat::toString with its defaults (FormatPrecision=0,
  FormatMaxPadding=3, TruncateZero=true) for a finite value."""
  if value == 0:
    return "-0.0E+0" if math.copysign(1.0, value) < 0 else "0.0E+0"
  sign = "-" if value < 0 else ""
  value = abs(value)
  precision = 2 + precision_bits * 59 // 196
  ds, exp = _decimal_digits(value, precision)
  n = len(ds)
  if exp >= 0:
    scientific = exp > 3 or n + exp > precision
  else:
    msd = exp + n - 1
    scientific = msd < 0 and -msd > 3
  if scientific:
    e = exp + n - 1
    frac = ds[1:] or "0"
    return f"{sign}{ds[0]}.{frac}E{'+' if e >= 0 else '-'}{abs(e)}"
  if exp >= 0:
    return sign + ds + "0" * exp
  point = n + exp
  if point > 0:
    return sign + ds[:point] + "." + ds[point:]
  return sign + "0." + "0" * (-point) + ds


def format_float(value, ft: t.FloatType) -> str:
  """A float element spelled as MLIR's printFloatValue does."""
  dtype = numpy_dtype(ft)
  v = float(value)
  if math.isfinite(v):
    s = _format_exponential6(v)
    if _same_value(s, v, dtype):
      return s
    precision = _FLOAT_PRECISION.get(ft.name, 24)
    s = apfloat_to_string(v, precision)
    if "." in s:
      return s
  return "0x%X" % float_to_bits(value, ft)


def _same_value(s: str, v: float, dtype) -> bool:
  parsed = np.array([float(s)]).astype(dtype)[0]
  return float(parsed) == v and (math.copysign(1.0, float(parsed)) ==
                                 math.copysign(1.0, v))


def format_scale(value: float) -> str:
  """A `!quant.uniform` scale: APFloat::toString of the f64 value."""
  if not math.isfinite(value):
    return repr(value)
  s = apfloat_to_string(value, 53)
  return s
