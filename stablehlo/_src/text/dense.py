"""Element types <-> numpy dtypes, dense literal decoding and number spelling.

Shared by the parser (building `DenseElementsAttr` arrays from `dense<...>`
literals and hex blobs) and the printer (spelling floats the way MLIR's
`printFloatValue` does, choosing hex blobs for large constants).
"""

from __future__ import annotations

import fractions
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
  count = math.prod(shape)
  itemsize = dtype.itemsize
  if len(data) == count * itemsize:
    n = count
  elif len(data) == itemsize:
    n = 1
  else:
    return None
  if dtype.kind == "b":
    arr = np.frombuffer(data, dtype=np.uint8) != 0
  else:
    le = _LITTLE_ENDIAN.get(dtype)
    if le is None:
      le = _LITTLE_ENDIAN[dtype] = dtype.newbyteorder("<")
    arr = np.frombuffer(data, dtype=le).astype(dtype)
  if n == 1 and count != 1:
    return np.repeat(arr, count).reshape(shape)  # copies the bytes as they are
  return arr.reshape(shape)


_LITTLE_ENDIAN: dict = {}


def encode_hex_blob(array: np.ndarray) -> str:
  a = np.ascontiguousarray(array)
  if a.dtype == np.bool_:
    data = a.astype(np.uint8).tobytes()
  else:
    data = a.astype(a.dtype.newbyteorder("<")).tobytes()
  return "0x" + data.hex().upper()


# (precision in bits with the implicit bit, smallest normal exponent): what
# APFloat's fltSemantics say of each type, for the round-trip check below.
_FLOAT_FORMAT = {
    "f4E2M1FN": (2, 0), "f6E2M3FN": (4, 0), "f6E3M2FN": (3, -2),
    "f8E3M4": (5, -2), "f8E4M3": (4, -6), "f8E4M3FN": (4, -6),
    "f8E4M3FNUZ": (4, -7), "f8E4M3B11FNUZ": (4, -10), "f8E5M2": (3, -14),
    "f8E5M2FNUZ": (3, -15), "f8E8M0FNU": (1, -127), "bf16": (8, -126),
    "f16": (11, -14), "f32": (24, -126), "f64": (53, -1022),
    "tf32": (11, -126),
}


def _decimal_digits(value: fractions.Fraction,
                    format_precision: int) -> tuple[str, int]:
  """APFloat::toString's digit generation for a finite `value` > 0.

  The exact decimal expansion is first cut (floor) to roughly
  `format_precision` digits by a bit-count estimate, then rounded half-up to
  at most `format_precision` digits. The cut can leave exactly that many
  digits, in which case the result is truncated, not rounded: upstream
  prints f16 0.83642578125 as 8.364250e-01 for this reason.

  Returns (digits without trailing zeros, exponent of the last digit).
  """
  num, den = value.numerator, value.denominator
  exp = 0
  if den != 1:  # den == 2**k:  num / 2**k == num * 5**k / 10**k
    k = den.bit_length() - 1
    num *= 5 ** k
    exp = -k
  bits_required = (format_precision * 196 + 58) // 59
  bits = num.bit_length()
  if bits > bits_required:
    removable = (bits - bits_required) * 59 // 196
    if removable:
      exp += removable
      num //= 10 ** removable
  digits = str(num)
  stripped = digits.rstrip("0")
  exp += len(digits) - len(stripped)
  digits = stripped
  n = len(digits)
  if n > format_precision:
    kept = digits[:format_precision]
    exp += n - format_precision
    if digits[format_precision] >= "5":
      bumped = str(int(kept) + 1)
      if len(bumped) > len(kept):  # all nines carried through
        return "1", exp + format_precision
      kept = bumped
    stripped = kept.rstrip("0")
    exp += len(kept) - len(stripped)
    digits = stripped
  return digits, exp


def apfloat_to_string(value, precision_bits: int, format_precision: int = 0,
                      max_padding: int = 3, truncate_zero: bool = True) -> str:
  """llvm::APFloat::toString of a finite value of a type whose significand
  has `precision_bits` bits (defaults as upstream's: natural precision,
  padding 3, TruncateZero)."""
  v = fractions.Fraction(float(value))
  negative = v < 0 or (v == 0 and math.copysign(1.0, float(value)) < 0)
  sign = "-" if negative else ""
  if v == 0:
    if max_padding:
      return sign + "0"
    if truncate_zero:
      return sign + "0.0E+0"
    return sign + "0." + "0" * max(format_precision, 1) + "e+00"
  if not format_precision:
    format_precision = 2 + precision_bits * 59 // 196
  digits, exp = _decimal_digits(abs(v), format_precision)
  n = len(digits)
  if not max_padding:
    scientific = True
  elif exp >= 0:
    scientific = exp > max_padding or n + exp > format_precision
  else:
    msd = exp + n - 1
    scientific = msd < 0 and -msd > max_padding
  if scientific:
    e = exp + n - 1
    frac = digits[1:]
    if n == 1 and truncate_zero:
      frac = "0"
    if not truncate_zero and format_precision > n - 1:
      frac += "0" * (format_precision - n + 1)
    e_digits = str(abs(e))
    if not truncate_zero and len(e_digits) < 2:
      e_digits = "0" + e_digits
    return (f"{sign}{digits[0]}.{frac}{'E' if truncate_zero else 'e'}"
            f"{'+' if e >= 0 else '-'}{e_digits}")
  if exp >= 0:
    return sign + digits + "0" * exp
  whole = n + exp
  if whole > 0:
    return sign + digits[:whole] + "." + digits[whole:]
  return sign + "0." + "0" * (-whole) + digits


def _rounds_back(text: str, value: float, precision_bits: int,
                 min_exponent: int) -> bool:
  """Whether parsing `text` into the type (round to nearest, ties to even)
  gives back exactly `value` (finite, same sign; text has the same sign)."""
  target = abs(fractions.Fraction(value))
  parsed = abs(fractions.Fraction(text))
  if target == 0:
    return parsed == 0
  # target == m * 2**q with m an integer of at most precision_bits bits.
  e = max(target.numerator.bit_length() - target.denominator.bit_length(),
          min_exponent)
  if fractions.Fraction(2) ** e > target:
    e -= 1
  e = max(e, min_exponent)
  ulp = fractions.Fraction(2) ** (e - precision_bits + 1)
  m = target / ulp
  if m.denominator != 1:  # not a value of the type (tf32 held as f32)
    return False
  above = target + ulp / 2
  below = target - ulp / 2
  if m == 2 ** (precision_bits - 1) and e > min_exponent:
    below = target - ulp / 4  # the next value down has a finer spacing
  if below < parsed < above:
    return True
  return (parsed == above or parsed == below) and m.numerator % 2 == 0


def round_to_type(value, ft: t.Type) -> float:
  """`value` rounded to the float type `ft` (the value an MLIR attribute of
  that type holds); unchanged when `ft` has no numpy dtype."""
  dtype = numpy_dtype(ft) if isinstance(ft, t.FloatType) else None
  if dtype is None:
    return float(value)
  with np.errstate(over="ignore", invalid="ignore"):
    return float(np.asarray(value, dtype=np.float64).astype(dtype)[()])


def format_float(value, ft: t.FloatType) -> str:
  """A float element spelled as MLIR's printFloatValue does: the 6-digit
  exponent form if it reads back exactly, else APFloat's natural-precision
  form if it has a '.', else the bits in hex."""
  dtype = numpy_dtype(ft)
  if dtype is not None and np.asarray(value).dtype != dtype:
    # The IR may hold the literal as written (a Python float); upstream
    # holds, and prints, the value rounded to the type.
    with np.errstate(over="ignore", invalid="ignore"):
      value = np.asarray(value, dtype=np.float64).astype(dtype)[()]
  v = float(value)
  if math.isfinite(v):
    precision, min_exp = _FLOAT_FORMAT.get(ft.name, (24, -126))
    s = apfloat_to_string(v, precision, format_precision=6, max_padding=0,
                          truncate_zero=False)
    if _rounds_back(s, v, precision, min_exp):
      return s
    s = apfloat_to_string(v, precision)
    if "." in s:
      return s
  return "0x%X" % float_to_bits(value, ft)


def format_scale(value: float) -> str:
  """A `!quant.uniform` scale: APFloat::toString of the f64 value."""
  if not math.isfinite(value):
    return repr(value)
  s = apfloat_to_string(value, 53)
  return s
