"""PJRT_Buffer_Type <-> numpy dtype, one table.

The narrow float and integer types come from ml_dtypes, as in JAX. Types
without a numpy counterpart (TOKEN, S1/U1 and any a given ml_dtypes lacks)
are simply absent from the table, and converting them raises.

A TOKEN buffer (an ordering token a program takes or returns) holds no
data: XLA represents it as a zero-sized buffer. A plugin stores one as a
scalar of the zero-sized dtype TOKEN_STORAGE (`storage_dtype`), which is
not in the table, so no host array converts to or from a token.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

import support
from pjrt._src.abi_types import BufferType

# BufferType -> numpy scalar type (or the ml_dtypes attribute that holds it).
_TABLE: dict[BufferType, Any] = {
    BufferType.PRED: np.bool_,
    BufferType.S8: np.int8,
    BufferType.S16: np.int16,
    BufferType.S32: np.int32,
    BufferType.S64: np.int64,
    BufferType.U8: np.uint8,
    BufferType.U16: np.uint16,
    BufferType.U32: np.uint32,
    BufferType.U64: np.uint64,
    BufferType.F16: np.float16,
    BufferType.F32: np.float32,
    BufferType.F64: np.float64,
    BufferType.C64: np.complex64,
    BufferType.C128: np.complex128,
    BufferType.BF16: "bfloat16",
    BufferType.F8E5M2: "float8_e5m2",
    BufferType.F8E4M3FN: "float8_e4m3fn",
    BufferType.F8E4M3B11FNUZ: "float8_e4m3b11fnuz",
    BufferType.F8E5M2FNUZ: "float8_e5m2fnuz",
    BufferType.F8E4M3FNUZ: "float8_e4m3fnuz",
    BufferType.S4: "int4",
    BufferType.U4: "uint4",
    BufferType.S2: "int2",
    BufferType.U2: "uint2",
    BufferType.F8E4M3: "float8_e4m3",
    BufferType.F8E3M4: "float8_e3m4",
    BufferType.F8E8M0FNU: "float8_e8m0fnu",
    BufferType.F4E2M1FN: "float4_e2m1fn",
}

TO_NUMPY: dict[BufferType, np.dtype] = {}
for _buffer_type, _scalar in _TABLE.items():
  if isinstance(_scalar, str):
    _scalar = getattr(ml_dtypes, _scalar, None)
    if _scalar is None:
      continue
  TO_NUMPY[_buffer_type] = np.dtype(_scalar)
del _buffer_type, _scalar

FROM_NUMPY: dict[np.dtype, BufferType] = {
    dtype: buffer_type for buffer_type, dtype in TO_NUMPY.items()}

# Element types narrower than a byte: numpy stores one per byte, and such
# types need the dense (no strides) host layout.
SUB_BYTE = frozenset({BufferType.S4, BufferType.U4, BufferType.S2,
                      BufferType.U2, BufferType.F4E2M1FN, BufferType.S1,
                      BufferType.U1})


def buffer_type(dtype: Any) -> BufferType:
  """The PJRT_Buffer_Type of a numpy dtype.

  Raises:
    support.InvalidArgumentError: no PJRT type for `dtype`.
  """
  dtype = np.dtype(dtype)
  try:
    return FROM_NUMPY[dtype]
  except KeyError:
    raise support.InvalidArgumentError(
        f"numpy dtype {dtype} has no PJRT_Buffer_Type") from None


def numpy_dtype(element_type: int) -> np.dtype:
  """The numpy dtype of a PJRT_Buffer_Type.

  Raises:
    support.UnimplementedError: the type has no numpy counterpart.
  """
  try:
    name = BufferType(element_type).name
  except ValueError:
    name = str(element_type)
  else:
    dtype = TO_NUMPY.get(BufferType(element_type))
    if dtype is not None:
      return dtype
  raise support.UnimplementedError(
      f"PJRT_Buffer_Type {name} has no numpy dtype")


# The storage of a TOKEN buffer: a scalar of zero bytes.
TOKEN_STORAGE = np.dtype("V0")


def storage_dtype(element_type: int) -> np.dtype:
  """The dtype of the array that holds a buffer of `element_type`: its
  numpy dtype, or TOKEN_STORAGE for a token.

  Raises:
    support.UnimplementedError: the type has no numpy counterpart.
  """
  if element_type == BufferType.TOKEN:
    return TOKEN_STORAGE
  return numpy_dtype(element_type)


def token_array() -> np.ndarray:
  """A token buffer's data: a new scalar of zero bytes."""
  return np.empty((), TOKEN_STORAGE)
