"""Facts about primitive types (xla/primitive_util.h): names, widths, kinds,
and the numpy dtype of each (ml_dtypes supplies bf16, f8, f4 and int2/int4).
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np

import support
from xla.xla_data import PrimitiveType

P = PrimitiveType

# type -> (lowercase name, bit width, numpy dtype or None).
# S1/U1 have no numpy dtype (ml_dtypes has no 1-bit integers); tuple, token,
# opaque and buffer are not array element types.
_TABLE: dict[PrimitiveType, tuple[str, int, Optional[np.dtype]]] = {
    P.PRIMITIVE_TYPE_INVALID: ("invalid", 0, None),
    P.PRED: ("pred", 1, np.dtype(np.bool_)),
    P.S1: ("s1", 1, None),
    P.S2: ("s2", 2, np.dtype(ml_dtypes.int2)),
    P.S4: ("s4", 4, np.dtype(ml_dtypes.int4)),
    P.S8: ("s8", 8, np.dtype(np.int8)),
    P.S16: ("s16", 16, np.dtype(np.int16)),
    P.S32: ("s32", 32, np.dtype(np.int32)),
    P.S64: ("s64", 64, np.dtype(np.int64)),
    P.U1: ("u1", 1, None),
    P.U2: ("u2", 2, np.dtype(ml_dtypes.uint2)),
    P.U4: ("u4", 4, np.dtype(ml_dtypes.uint4)),
    P.U8: ("u8", 8, np.dtype(np.uint8)),
    P.U16: ("u16", 16, np.dtype(np.uint16)),
    P.U32: ("u32", 32, np.dtype(np.uint32)),
    P.U64: ("u64", 64, np.dtype(np.uint64)),
    P.F16: ("f16", 16, np.dtype(np.float16)),
    P.F32: ("f32", 32, np.dtype(np.float32)),
    P.BF16: ("bf16", 16, np.dtype(ml_dtypes.bfloat16)),
    P.F64: ("f64", 64, np.dtype(np.float64)),
    P.F8E5M2: ("f8e5m2", 8, np.dtype(ml_dtypes.float8_e5m2)),
    P.F8E4M3: ("f8e4m3", 8, np.dtype(ml_dtypes.float8_e4m3)),
    P.F8E4M3FN: ("f8e4m3fn", 8, np.dtype(ml_dtypes.float8_e4m3fn)),
    P.F8E4M3B11FNUZ: ("f8e4m3b11fnuz", 8,
                      np.dtype(ml_dtypes.float8_e4m3b11fnuz)),
    P.F8E3M4: ("f8e3m4", 8, np.dtype(ml_dtypes.float8_e3m4)),
    P.F8E5M2FNUZ: ("f8e5m2fnuz", 8, np.dtype(ml_dtypes.float8_e5m2fnuz)),
    P.F8E4M3FNUZ: ("f8e4m3fnuz", 8, np.dtype(ml_dtypes.float8_e4m3fnuz)),
    P.F4E2M1FN: ("f4e2m1fn", 4, np.dtype(ml_dtypes.float4_e2m1fn)),
    P.F8E8M0FNU: ("f8e8m0fnu", 8, np.dtype(ml_dtypes.float8_e8m0fnu)),
    P.C64: ("c64", 64, np.dtype(np.complex64)),
    P.C128: ("c128", 128, np.dtype(np.complex128)),
    P.TUPLE: ("tuple", 0, None),
    P.OPAQUE_TYPE: ("opaque", 0, None),
    P.TOKEN: ("token", 0, None),
    P.BUFFER: ("buffer", 0, None),
}

_BY_NAME = {name: t for t, (name, _, _) in _TABLE.items()}

_SIGNED = frozenset({P.S1, P.S2, P.S4, P.S8, P.S16, P.S32, P.S64})
_UNSIGNED = frozenset({P.U1, P.U2, P.U4, P.U8, P.U16, P.U32, P.U64})
_FLOATS = frozenset({
    P.F16, P.F32, P.BF16, P.F64, P.F8E5M2, P.F8E4M3, P.F8E4M3FN,
    P.F8E4M3B11FNUZ, P.F8E3M4, P.F8E5M2FNUZ, P.F8E4M3FNUZ, P.F4E2M1FN,
    P.F8E8M0FNU})
_COMPLEX = frozenset({P.C64, P.C128})


def lowercase_name(t: PrimitiveType) -> str:
  """The spelling in shapes: `f32`, `pred`, `opaque`, `f8e4m3fn`..."""
  return _TABLE[PrimitiveType(t)][0]


def from_name(name: str) -> Optional[PrimitiveType]:
  """The type spelled `name`, or None (including the invalid `invalid`)."""
  t = _BY_NAME.get(name)
  return None if t == P.PRIMITIVE_TYPE_INVALID else t


def is_type_name(name: str) -> bool:
  return from_name(name) is not None


def is_signed_integral(t: PrimitiveType) -> bool:
  return t in _SIGNED


def is_unsigned_integral(t: PrimitiveType) -> bool:
  return t in _UNSIGNED


def is_integral(t: PrimitiveType) -> bool:
  return t in _SIGNED or t in _UNSIGNED


def is_floating_point(t: PrimitiveType) -> bool:
  return t in _FLOATS


def is_complex(t: PrimitiveType) -> bool:
  return t in _COMPLEX


def is_array_type(t: PrimitiveType) -> bool:
  """True for element types of arrays (not tuple/token/opaque/buffer)."""
  return t == P.PRED or is_integral(t) or is_floating_point(t) or is_complex(t)


def bit_width(t: PrimitiveType) -> int:
  """Bits of one element (PRED counts 1; complex counts both halves)."""
  return _TABLE[PrimitiveType(t)][1]


def byte_width(t: PrimitiveType) -> int:
  """Bytes one element occupies unpacked (sub-byte types take one byte)."""
  bits = bit_width(t)
  return max(1, (bits + 7) // 8) if bits else 0


def component_type(t: PrimitiveType) -> PrimitiveType:
  """The real type of a complex type's parts; other types map to themselves."""
  return {P.C64: P.F32, P.C128: P.F64}.get(t, t)


def complex_type_of(t: PrimitiveType) -> Optional[PrimitiveType]:
  """The complex type whose parts are `t` (F32 -> C64), or None."""
  return {P.F32: P.C64, P.F64: P.C128}.get(t)


def numpy_dtype(t: PrimitiveType) -> np.dtype:
  """The numpy dtype holding elements of `t`; UnimplementedError if none."""
  dtype = _TABLE[PrimitiveType(t)][2]
  if dtype is None:
    raise support.UnimplementedError(
        f"Unimplemented: no numpy dtype for primitive type "
        f"{lowercase_name(t)}")
  return dtype


_BY_DTYPE = {dt: t for t, (_, _, dt) in _TABLE.items() if dt is not None}


def from_numpy_dtype(dtype) -> PrimitiveType:
  """The primitive type of a numpy dtype; InvalidArgumentError if none."""
  dtype = np.dtype(dtype)
  try:
    return _BY_DTYPE[dtype]
  except KeyError:
    raise support.InvalidArgumentError(
        f"numpy dtype {dtype} has no XLA primitive type") from None


def all_types() -> tuple[PrimitiveType, ...]:
  """Every valid primitive type, in proto-number order."""
  return tuple(sorted(t for t in _TABLE if t != P.PRIMITIVE_TYPE_INVALID))
