"""Tests for StableHLO <-> VHLO attribute conversion."""

import numpy as np
import pytest

import support
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import type_conversion as tc


def _tensor(shape, et):
  return t.RankedTensorType(tuple(shape), et)


def test_dense_blob_layout():
  i32 = t.IntegerType(32)
  # Little-endian elements, row-major.
  assert ac.dense_blob(_tensor([2], i32), np.array([1, -2], np.int32)) == \
      b"\x01\x00\x00\x00\xfe\xff\xff\xff"
  # All elements bitwise equal: one element stored.
  assert ac.dense_blob(_tensor([3], i32), np.array([7, 7, 7])) == \
      b"\x07\x00\x00\x00"
  # 0.0 and -0.0 differ bitwise, so this is not a splat.
  assert len(ac.dense_blob(_tensor([2], t.f32),
                           np.array([0.0, -0.0], np.float32))) == 8
  assert ac.dense_blob(_tensor([0], i32), np.zeros((0,), np.int32)) == b""


def test_dense_blob_booleans():
  i1 = t.IntegerType(1)
  # Bit-packed, least significant bit first.
  assert ac.dense_blob(_tensor([3], i1), np.array([True, False, True])) == \
      b"\x05"
  assert ac.dense_blob(_tensor([10], i1), np.array([False] * 9 + [True])) == \
      b"\x00\x02"
  # A splat of several equal elements is one byte, 0xFF or 0x00; a single
  # element is just packed (jaxlib writes `dense<true> : tensor<i1>` as 01).
  assert ac.dense_blob(_tensor([32], i1), np.ones(32, bool)) == b"\xff"
  assert ac.dense_blob(_tensor([4], i1), np.zeros(4, bool)) == b"\x00"
  assert ac.dense_blob(_tensor([], i1), np.array(True)) == b"\x01"


def test_dense_round_trip_keeps_values_and_dtype():
  for et, values in ((t.IntegerType(1), [True, False, True, True]),
                     (t.IntegerType(8, unsigned=True), [0, 255, 7, 7]),
                     (t.FloatType("bf16"), [1.5, -2.0, 0.0, 3.0]),
                     (t.ComplexType(t.f32), [1 + 2j, 3 - 4j, 0, 1j]),
                     (t.IndexType(), [1, 2, 3, 4])):
    ty = _tensor([2, 2], et)
    from stablehlo._src.text import dense  # pylint: disable=g-import-not-at-top
    arr = np.array(values).astype(dense.numpy_dtype(et)).reshape(2, 2)
    back = ac.from_vhlo(ac.to_vhlo(a.DenseElementsAttr(ty, arr)))
    assert back.type == ty
    assert back.array.dtype == arr.dtype
    assert np.array_equal(back.array, arr)
  splat = ac.from_vhlo(ac.to_vhlo(a.DenseElementsAttr(
      _tensor([3], t.f32), np.full(3, 2.0, np.float32))))
  assert splat.splat and splat.array.shape == (3,)


@pytest.mark.parametrize("et,value", [(t.f32, 2.5), (t.IntegerType(1), True),
                                      (t.FloatType("bf16"), -1.0),
                                      (t.ComplexType(t.f64), 1 - 2j)])
def test_large_splats_stay_one_element(et, value):
  """A splat of a large shape decodes as a broadcast view of its element,
  not a full array (JAX writes one for every zeros / ones of a program's
  arrays; materialised, an 8 KB program took 1.3 s to load and import)."""
  from stablehlo._src.text import dense  # pylint: disable=g-import-not-at-top
  ty = _tensor([1 << 12, 1 << 10], et)
  one = np.array(value).astype(dense.numpy_dtype(et))
  back = ac.from_vhlo(ac.to_vhlo(a.DenseElementsAttr(
      ty, np.broadcast_to(one, (1 << 12, 1 << 10)), splat=True)))
  assert back.splat and back.array.shape == (1 << 12, 1 << 10)
  assert not any(back.array.strides)
  assert back.array.dtype == one.dtype and back.array[7, 9] == one


def test_generic_attributes():
  cases = [
      (a.BoolAttr(True), ac.va("BooleanV1Attr", 1)),
      (a.IntegerAttr(-1, t.i32),
       ac.va("IntegerV1Attr", tc.vt("IntegerSI32V1Type"), 0xFFFFFFFF)),
      (a.IntegerAttr(200, t.IntegerType(8, unsigned=True)),
       ac.va("IntegerV1Attr", tc.vt("IntegerUI8V1Type"), 200)),
      (a.FloatAttr(1.5, t.f32),
       ac.va("FloatV1Attr", tc.vt("FloatF32V1Type"), 0x3FC00000)),
      (a.StringAttr("x"), ac.string("x")),
      (a.TypeAttr(t.f32), ac.va("TypeV1Attr", tc.vt("FloatF32V1Type"))),
      (a.ArrayAttr((a.StringAttr("x"),)), ac.array([ac.string("x")])),
      (a.DictionaryAttr((("b", a.BoolAttr(False)), ("a", a.StringAttr("")))),
       ac.va("DictionaryV1Attr", ((ac.string("a"), ac.string("")),
                                  (ac.string("b"), ac.boolean(False))))),
  ]
  for ours, vhlo in cases:
    assert ac.to_vhlo(ours) == vhlo
  # Dictionaries come back in MLIR's sorted order.
  assert ac.from_vhlo(cases[-1][1]) == a.DictionaryAttr(
      (("a", a.StringAttr("")), ("b", a.BoolAttr(False))))
  for ours, vhlo in cases[:-1]:
    assert ac.from_vhlo(vhlo) == ours


def test_symbols_and_dense_arrays():
  assert ac.to_vhlo(a.SymbolRefAttr("f")) == ac.string("f")
  arr = ac.to_vhlo(a.DenseArrayAttr(t.i64, (1, 2)))
  assert arr == ac.i64_tensor([1, 2])
  flags = ac.to_vhlo(a.DenseArrayAttr(t.i1, (True, False)))
  assert flags.fields[1] == b"\x01"
  with pytest.raises(support.InvalidArgumentError):
    ac.to_vhlo(a.DenseArrayAttr(t.i32, (1,)))
  with pytest.raises(support.InvalidArgumentError):
    ac.to_vhlo(a.SymbolRefAttr("a", ("b",)))


def test_enums_both_spellings():
  short = ac.parse_attr_text("#stablehlo<comparison_direction LT>")
  long = ac.parse_attr_text("#stablehlo.comparison_direction<LT>")
  expected = ac.va("ComparisonDirectionV1Attr", 5)
  assert ac.to_vhlo(short) == ac.to_vhlo(long) == expected
  assert ac.from_vhlo(expected) == short
  assert ac.from_vhlo(ac.va("CustomCallApiVersionV1Attr", 4)) == \
      a.IntegerAttr(4, t.i32)


def test_result_accuracy_and_axis_refs():
  ra = ac.parse_attr_text(
      "#stablehlo.result_accuracy<atol = 1.000000e-05, rtol = 0.000000e+00, "
      "ulps = 2, mode = #stablehlo.result_accuracy_mode<TOLERANCE>>")
  vra = ac.to_vhlo(ra)
  assert vra.kind == "ResultAccuracyV1Attr"
  assert vra.fields[2:] == (2, ac.va("ResultAccuracyModeV1Attr", 2))
  assert ac.to_vhlo(ac.from_vhlo(vra)) == vra
  axis = ac.parse_attr_text(
      '#stablehlo.axis_ref<name = "x", sub_axis_info = (1)2>')
  vaxis = ac.to_vhlo(axis)
  assert vaxis == ac.va("AxisRefV1Attr", ac.string("x"),
                        ac.va("SubAxisInfoV1Attr", 1, 2))
  assert ac.to_vhlo(ac.from_vhlo(vaxis)) == vaxis


@pytest.mark.parametrize("text", ['"s" : tensor<3xf32>', "unit",
                                  "#stablehlo.channel_handle<handle = 1, "
                                  "type = 0>", "affine_map<(d0) -> (d0)>"])
def test_unsupported_attributes(text):
  with pytest.raises(support.InvalidArgumentError):
    ac.to_vhlo(ac.parse_attr_text(text))


def test_from_vhlo_rejects_malformed():
  with pytest.raises(support.InvalidArgumentError):
    ac.from_vhlo(ac.va("TensorV1Attr", tc.vt("RankedTensorV1Type", (3,),
                                            tc.vt("FloatF32V1Type")),
                       b"\x00\x00\x00"))
  with pytest.raises(support.InvalidArgumentError):
    ac.from_vhlo(ac.va("MeshV1Attr", ac.array(()), None))


def test_dense_shared_follows_the_array_in_place():
  i32 = t.IntegerType(32)
  arr = np.array([1, 2], np.int32)
  attr = a.DenseElementsAttr(_tensor([2], i32), arr)
  first = ac.to_vhlo_shared(attr)
  assert first == ac.to_vhlo(attr)
  # Kept: the same object comes back while the array is unchanged.
  assert ac.to_vhlo_shared(attr) is first
  arr[1] = 3  # changed in place: converted anew
  second = ac.to_vhlo_shared(attr)
  assert second == ac.to_vhlo(attr) and second != first
  assert second.fields[1] == b"\x01\x00\x00\x00\x03\x00\x00\x00"
  assert ac.to_vhlo_shared(attr) is second
  arr.dtype = np.float32  # same bytes, other dtype: converted anew
  third = ac.to_vhlo_shared(attr)
  assert third == ac.to_vhlo(attr) and third != second
