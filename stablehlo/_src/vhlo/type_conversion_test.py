"""Tests for StableHLO <-> VHLO type conversion."""

import pytest

import support
from stablehlo._src.ir import types as t
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import type_conversion as tc

vt = tc.vt


def _ty(text):
  return tc.parse_type_text(text)


@pytest.mark.parametrize("text,expected", [
    ("i1", vt("BooleanV1Type")),
    ("i8", vt("IntegerSI8V1Type")),
    ("ui64", vt("IntegerUI64V1Type")),
    ("i2", vt("IntegerSI2V1Type")),
    ("bf16", vt("FloatBF16V1Type")),
    ("f8E4M3FN", vt("FloatF8E4M3FNV1Type")),
    ("index", vt("IndexV1Type")),
    ("complex<f64>", vt("ComplexV1Type", vt("FloatF64V1Type"))),
    ("tensor<2x?xf32>", vt("RankedTensorV1Type", (2, tc.DYNAMIC),
                           vt("FloatF32V1Type"))),
    ("tensor<*xi32>", vt("UnrankedTensorV1Type", vt("IntegerSI32V1Type"))),
    ("!stablehlo.token", vt("TokenV1Type")),
    ("tuple<i1, f32>", vt("TupleV1Type", (vt("BooleanV1Type"),
                                          vt("FloatF32V1Type")))),
    ("memref<2x?xf32>", vt("RankedBufferV1Type", (2, tc.DYNAMIC),
                           vt("FloatF32V1Type"))),
    ("!stablehlo.future<tensor<f32>, tensor<i32>>", vt("FutureV1Type", (
        vt("RankedTensorV1Type", (), vt("FloatF32V1Type")),
        vt("RankedTensorV1Type", (), vt("IntegerSI32V1Type"))))),
])
def test_to_vhlo(text, expected):
  ty = _ty(text)
  assert tc.to_vhlo(ty) == expected
  back = tc.from_vhlo(expected)
  assert back == ty


def test_tensor_encoding_round_trip():
  ty = _ty("tensor<?x4xf32, #stablehlo.bounds<16, ?>>")
  vty = ac.type_to_vhlo(ty)
  assert vty.kind == "RankedTensorV1TypeWithEncoding"
  assert vty.fields[0].fields == ((16, tc.DYNAMIC),)
  assert ac.type_from_vhlo(vty) == ty


def test_quantized_flags_and_default_ranges():
  signed = _ty("!quant.uniform<i8:f32, 0.5:3>")
  vq = tc.to_vhlo(signed)
  flags, storage, _, scale, zp, lo, hi = vq.fields
  assert (flags, storage.kind, zp, lo, hi) == (1, "IntegerSI8V1Type", 3,
                                               -128, 127)
  assert scale == 0x3FE0000000000000  # 0.5 as an IEEE double.
  assert tc.from_vhlo(vq) == signed
  unsigned = _ty("!quant.uniform<u8:f32, 0.5>")
  flags, storage, _, _, _, lo, hi = tc.to_vhlo(unsigned).fields
  assert (flags, storage.kind, lo, hi) == (0, "IntegerSI8V1Type", 0, 255)
  assert tc.from_vhlo(tc.to_vhlo(unsigned)) == unsigned
  narrow = _ty("!quant.uniform<i8<-127:127>:f32, 2.0>")
  assert tc.to_vhlo(narrow).fields[5:] == (-127, 127)
  assert tc.from_vhlo(tc.to_vhlo(narrow)) == narrow


def test_per_axis_quantized():
  ty = _ty("tensor<2x!quant.uniform<i8:f32:0, {34.0:16, 34.0:16}>>")
  vq = tc.to_vhlo(ty).fields[1]
  assert vq.kind == "UniformQuantizedPerAxisV1Type"
  assert vq.fields[3] == 0 and vq.fields[7] == (16, 16)
  assert tc.from_vhlo(tc.to_vhlo(ty)) == ty


@pytest.mark.parametrize("text", ["si32", "ui1", "i3", "!foo.bar",
                                  "memref<2xf32, 1>"])
def test_unsupported_types(text):
  with pytest.raises(support.InvalidArgumentError):
    tc.to_vhlo(_ty(text))


def test_from_vhlo_rejects_non_vhlo():
  with pytest.raises(support.InvalidArgumentError):
    tc.from_vhlo(t.f32)
  with pytest.raises(support.InvalidArgumentError):
    tc.from_vhlo(vt("NoSuchV1Type"))
