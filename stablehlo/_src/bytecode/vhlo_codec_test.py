"""Tests for the VHLO attribute/type codec helpers."""

import numpy as np
import pytest

import support
from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import testdata
from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import vhlo_codec


def _tensor_type(shape, kind):
  return tree.Type("vhlo", "RankedTensorV1Type",
                   (tuple(shape), tree.Type("vhlo", kind)))


def test_enum_names():
  attr = tree.Attr("vhlo", "ComparisonDirectionV1Attr", (5,))
  assert vhlo_codec.enum_name(attr) == "LT"
  with pytest.raises(support.InvalidArgumentError):
    vhlo_codec.enum_name(tree.Attr("vhlo", "PrecisionV1Attr", (9,)))


@pytest.mark.parametrize("values", [[True, False, True], [True] * 9,
                                    [False] * 3, [True]])
def test_bool_tensors_are_bit_packed(values):
  t = _tensor_type([len(values)], "BooleanV1Type")
  blob = vhlo_codec.tensor_blob(t, np.array(values))
  assert len(blob) == (len(values) + 7) // 8
  attr = tree.Attr("vhlo", "TensorV1Attr", (t, blob))
  np.testing.assert_array_equal(vhlo_codec.tensor_values(attr), values)


def test_bool_splat():
  t = _tensor_type([4, 4], "BooleanV1Type")
  assert vhlo_codec.tensor_blob(t, np.array(True)) == b"\xff"
  attr = tree.Attr("vhlo", "TensorV1Attr", (t, b"\xff"))
  assert vhlo_codec.tensor_values(attr).all()


def test_splats_decode_as_views_of_one_element():
  """A splat constant of a huge shape (JAX writes them for zeros and
  ones of a program's arrays) costs no memory to read: reading it as a
  full array made a 8 KB program take 1.3 s to load (regression)."""
  t = _tensor_type([1 << 14, 1 << 10], "FloatF32V1Type")
  blob = np.float32(2.5).tobytes()
  values = vhlo_codec.tensor_values(tree.Attr("vhlo", "TensorV1Attr",
                                              (t, blob)))
  assert values.shape == (1 << 14, 1 << 10) and not any(values.strides)
  assert values[123, 45] == np.float32(2.5)


def test_unpacked_bools_are_accepted():
  t = _tensor_type([9], "BooleanV1Type")
  attr = tree.Attr("vhlo", "TensorV1Attr", (t, bytes([1, 0] * 4 + [1])))
  assert vhlo_codec.tensor_values(attr).tolist() == [True, False] * 4 + [True]


def test_f32_tensor():
  t = _tensor_type([2, 2], "FloatF32V1Type")
  values = np.arange(4, dtype=np.float32).reshape(2, 2)
  attr = tree.Attr("vhlo", "TensorV1Attr", (t, vhlo_codec.tensor_blob(t, values)))
  np.testing.assert_array_equal(vhlo_codec.tensor_values(attr), values)


def test_corpus_tensors_decode():
  files = testdata.corpus_files()
  if not files:
    pytest.skip("no corpus")
  f = reader.read(files[-1][0].read_bytes())
  seen = 0
  tensors = [v for op in f.ops() if op.properties is not None
             for v in op.properties.values
             if getattr(v, "kind", None) == "TensorV1Attr"]
  for value in tensors:
    try:
      array = vhlo_codec.tensor_values(value)
    except support.UnimplementedError:
      continue
    shape = vhlo_codec.CODEC.get(value.fields[0], "shape")
    assert array.shape == tuple(shape)
    seen += 1
  assert seen > 0
