"""Tests for the value printer (upstream's --interpret output layout)."""

import numpy as np

from stablehlo._src.interpreter import printing
from stablehlo._src.ir import types as t


def _ty(shape, et):
  return t.RankedTensorType(tuple(shape), et)


def test_scalar_and_vector_and_matrix():
  i8 = t.IntegerType(8)
  assert printing.format_value(np.array(1, np.uint8),
                               _ty((), t.IntegerType(8, True))) == (
                                   "tensor<ui8> {1}")
  assert printing.format_value(np.array([1, -2], np.int8), _ty((2,), i8)) == (
      "tensor<2xi8> {\n  [1, -2]\n}")
  assert printing.format_value(
      np.array([[1, 2], [3, 4]], np.int8), _ty((2, 2), i8)) == (
          "tensor<2x2xi8> {\n  [\n    [1, 2],\n    [3, 4]\n  ]\n}")


def test_floats_bools_complex():
  assert printing.format_value(np.array([1.0, -0.5], np.float16),
                               _ty((2,), t.FloatType("f16"))) == (
                                   "tensor<2xf16> {\n  [1.000000e+00, "
                                   "-5.000000e-01]\n}")
  assert printing.format_value(np.array([True, False]),
                               _ty((2,), t.i1)) == (
                                   "tensor<2xi1> {\n  [true, false]\n}")
  c = t.ComplexType(t.f32)
  assert printing.format_value(np.array([1 + 2j], np.complex64),
                               _ty((1,), c)) == (
                                   "tensor<1xcomplex<f32>> {\n"
                                   "  [[1.000000e+00, 2.000000e+00]]\n}")


def test_dense_form():
  out = printing.format_value(np.array([1, 2], np.int32),
                              _ty((2,), t.i32), dense=True)
  assert out == "dense<[1, 2]> : tensor<2xi32>"
