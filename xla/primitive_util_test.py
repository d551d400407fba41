"""Tests for xla.primitive_util and the PrimitiveType numbering."""

import ml_dtypes
import numpy as np
import pytest

import support
from xla import primitive_util as pu
from xla.xla_data import PrimitiveType as P


def test_proto_numbering():
  # Field numbers of xla_data.proto's PrimitiveType.
  expected = {
      "PRED": 1, "S8": 2, "S16": 3, "S32": 4, "S64": 5, "U8": 6, "U16": 7,
      "U32": 8, "U64": 9, "F16": 10, "F32": 11, "F64": 12, "TUPLE": 13,
      "OPAQUE_TYPE": 14, "C64": 15, "BF16": 16, "TOKEN": 17, "C128": 18,
      "F8E5M2": 19, "F8E4M3FN": 20, "S4": 21, "U4": 22, "F8E4M3B11FNUZ": 23,
      "F8E5M2FNUZ": 24, "F8E4M3FNUZ": 25, "S2": 26, "U2": 27, "F8E4M3": 28,
      "F8E3M4": 29, "S1": 30, "U1": 31, "F4E2M1FN": 32, "F8E8M0FNU": 33,
      "BUFFER": 34,
  }
  assert {t.name: int(t) for t in P if t.name != "PRIMITIVE_TYPE_INVALID"
         } == expected


@pytest.mark.parametrize("t,name", [
    (P.PRED, "pred"), (P.S4, "s4"), (P.U64, "u64"), (P.BF16, "bf16"),
    (P.F8E4M3FN, "f8e4m3fn"), (P.F8E4M3B11FNUZ, "f8e4m3b11fnuz"),
    (P.F4E2M1FN, "f4e2m1fn"), (P.F8E8M0FNU, "f8e8m0fnu"), (P.C128, "c128"),
    (P.OPAQUE_TYPE, "opaque"), (P.TOKEN, "token"), (P.TUPLE, "tuple"),
])
def test_names_round_trip(t, name):
  assert pu.lowercase_name(t) == name
  assert pu.from_name(name) == t


def test_unknown_names():
  assert pu.from_name("f33") is None
  assert pu.from_name("invalid") is None
  assert not pu.is_type_name("F32")  # names are lowercase


@pytest.mark.parametrize("t,dtype", [
    (P.PRED, np.bool_), (P.S8, np.int8), (P.U16, np.uint16),
    (P.F32, np.float32), (P.F64, np.float64), (P.C64, np.complex64),
    (P.BF16, ml_dtypes.bfloat16), (P.S4, ml_dtypes.int4),
    (P.U2, ml_dtypes.uint2), (P.F8E5M2, ml_dtypes.float8_e5m2),
    (P.F8E3M4, ml_dtypes.float8_e3m4),
])
def test_numpy_dtypes(t, dtype):
  assert pu.numpy_dtype(t) == np.dtype(dtype)
  assert pu.from_numpy_dtype(dtype) == t


def test_types_without_dtype():
  with pytest.raises(support.UnimplementedError, match="s1"):
    pu.numpy_dtype(P.S1)
  with pytest.raises(support.UnimplementedError):
    pu.numpy_dtype(P.TUPLE)
  with pytest.raises(support.InvalidArgumentError):
    pu.from_numpy_dtype(np.dtype("U3"))


def test_kinds_and_widths():
  assert pu.is_signed_integral(P.S2) and not pu.is_signed_integral(P.U2)
  assert pu.is_unsigned_integral(P.U64)
  assert pu.is_floating_point(P.F8E8M0FNU) and not pu.is_floating_point(
      P.C64)
  assert pu.is_complex(P.C128)
  assert not pu.is_array_type(P.TOKEN) and pu.is_array_type(P.PRED)
  assert (pu.bit_width(P.S4), pu.byte_width(P.S4)) == (4, 1)
  assert (pu.bit_width(P.C64), pu.byte_width(P.C64)) == (64, 8)
  assert pu.component_type(P.C64) == P.F32
  assert pu.complex_type_of(P.F64) == P.C128
  assert pu.complex_type_of(P.F16) is None
  assert len(pu.all_types()) == 34
