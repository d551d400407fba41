"""Verifier tests for elementwise ops."""

import pytest

from stablehlo._src.ops import elementwise
from stablehlo._src.ops import testing as tt
from stablehlo._src.ops.testing import T, enum, i32, i64s, op, quant
from stablehlo._src.ops.testing import region

Q = quant("i8", "f32", (0.5,))
Q2 = quant("i8", "f32", (0.25,))
QA = quant("i8", "f32", (0.5, 0.5), axis=0)
QU = quant("i16", "f32", (0.5,))


def ok(o):
  assert tt.error_of(o) is None, tt.error_of(o)


def bad(o, cid):
  msg = tt.error_of(o)
  assert msg is not None, f"expected {cid}"
  assert cid in msg, msg
  assert f"'{o.name}' op" in msg


@pytest.mark.parametrize("name", sorted(elementwise._UNARY_BASELINE))
def test_unary_baseline(name):
  elem = "f32"
  short = name.removeprefix("stablehlo.")
  ok(op(name, [T("2x?x" + elem)], [T("2x3x" + elem)]))
  ok(op(name, [T("2", Q)], [T("2", Q2)]))  # baseline
  bad(op(name, [T("2xf32")], [T("3xf32")]), f"{short}_c1")
  bad(op(name, [T("2xf32")], [T("2xf64")]), f"{short}_c1")


@pytest.mark.parametrize("name", ["ceil", "floor", "round_nearest_even"])
def test_unary_float_only(name):
  bad(op("stablehlo." + name, [T("2xi32")], [T("2xi32")]), f"{name}_schema")


@pytest.mark.parametrize("name,elem", [
    ("count_leading_zeros", "i32"), ("popcnt", "ui8"), ("not", "i1")])
def test_unary_same_type(name, elem):
  ok(op("stablehlo." + name, [T("4x" + elem)], [T("4x" + elem)]))
  bad(op("stablehlo." + name, [T("4x" + elem)], [T("5x" + elem)]),
      f"{name}_c1")


@pytest.mark.parametrize("name", ["and", "or", "xor", "shift_left",
                                  "shift_right_arithmetic",
                                  "shift_right_logical"])
def test_binary_same_type(name):
  ok(op("stablehlo." + name, [T("4xi32"), T("4xi32")], [T("4xi32")]))
  bad(op("stablehlo." + name, [T("4xi32"), T("4xi64")], [T("4xi32")]),
      f"{name}_c1")
  bad(op("stablehlo." + name, [T("4xf32"), T("4xf32")], [T("4xf32")]),
      f"{name}_schema")


@pytest.mark.parametrize("name", sorted(elementwise._BINARY_BASELINE))
def test_binary_baseline(name):
  ok(op(name, [T("4xf32"), T("?xf32")], [T("4xf32")]))
  ok(op(name, [T("4", Q), T("4", Q2)], [T("4", Q)]))
  bad(op(name, [T("4xf32"), T("4xf32")], [T("4xf16")]),
      f"{name.removeprefix('stablehlo.')}_c1")


def test_add():
  ok(op("stablehlo.add", [T("4xf32"), T("4xf32")], [T("4xf32")]))
  ok(op("stablehlo.add", [T("4", Q), T("4", Q2)], [T("4", Q)]))
  ok(op("stablehlo.add", [T("2x3", QA), T("2x3", Q)], [T("2x3", QA)]))
  bad(op("stablehlo.add", [T("4xf32"), T("4xf32")], [T("5xf32")]), "add_c1")
  bad(op("stablehlo.add", [T("4", Q), T("4xf32")], [T("4", Q)]), "add_c2")
  bad(op("stablehlo.add", [T("4", Q), T("4", QU)], [T("4", Q)]), "add_c3")
  bad(op("stablehlo.add", [T("4", Q), T("4", quant("i8", "f16"))],
         [T("4", Q)]), "add_c4")
  bad(op("stablehlo.add", [T("2x3", QA), T("2x3", Q)], [T("2x3", Q)]),
      "add_c5")
  qa1 = quant("i8", "f32", (0.5,) * 3, axis=1)
  bad(op("stablehlo.add", [T("2x3", QA), T("2x3", Q)], [T("2x3", qa1)]),
      "add_c6")
  bad(op("stablehlo.add", [T("2x3", Q), T("2x3", QA)], [T("2x3", qa1)]),
      "add_c7")


def test_abs_real_imag_complex():
  ok(op("stablehlo.abs", [T("2xcomplex<f32>")], [T("2xf32")]))
  ok(op("stablehlo.abs", [T("2xi32")], [T("2xi32")]))
  bad(op("stablehlo.abs", [T("2xf32")], [T("3xf32")]), "abs_c1")
  bad(op("stablehlo.abs", [T("2xcomplex<f32>")], [T("2xf64")]), "abs_c2")
  for name in ("real", "imag"):
    ok(op("stablehlo." + name, [T("2xcomplex<f64>")], [T("2xf64")]))
    bad(op("stablehlo." + name, [T("2xcomplex<f64>")], [T("3xf64")]),
        f"{name}_c1")
    bad(op("stablehlo." + name, [T("2xcomplex<f64>")], [T("2xf32")]),
        f"{name}_c2")
  ok(op("stablehlo.complex", [T("2xf32"), T("2xf32")],
        [T("2xcomplex<f32>")]))
  bad(op("stablehlo.complex", [T("2xf32"), T("3xf32")],
         [T("2xcomplex<f32>")]), "complex_c1")
  bad(op("stablehlo.complex", [T("2xf32"), T("2xf32")],
         [T("3xcomplex<f32>")]), "complex_c2")
  bad(op("stablehlo.complex", [T("2xf32"), T("2xf32")],
         [T("2xcomplex<f64>")]), "complex_c3")


def test_is_finite():
  ok(op("stablehlo.is_finite", [T("2xf32")], [T("2xi1")]))
  bad(op("stablehlo.is_finite", [T("2xf32")], [T("3xi1")]), "is_finite_c1")


def _cmp(lhs, rhs, res, direction="EQ", compare_type=None):
  attrs = {"comparison_direction": enum("comparison_direction", direction)}
  if compare_type:
    attrs["compare_type"] = enum("comparison_type", compare_type)
  return op("stablehlo.compare", [T(lhs), T(rhs)], [T(res)], **attrs)


def test_compare():
  ok(_cmp("2xf32", "2xf32", "2xi1", "LT", "TOTALORDER"))
  ok(_cmp("2xui8", "2xui8", "2xi1", "GE", "UNSIGNED"))
  bad(_cmp("2xf32", "2xf64", "2xi1"), "compare_c1")
  bad(_cmp("2xf32", "2xf32", "3xi1"), "compare_c2")
  bad(_cmp("2xi32", "2xi32", "2xi1", "EQ", "FLOAT"), "compare_c3")
  bad(_cmp("2xcomplex<f32>", "2xcomplex<f32>", "2xi1", "EQ", "TOTALORDER"),
      "compare_c3")
  bad(_cmp("2xf32", "2xf32", "2xi1", "XX"), "compare_schema")


def test_select_clamp():
  ok(op("stablehlo.select", [T("i1"), T("2xf32"), T("2xf32")], [T("2xf32")]))
  ok(op("stablehlo.select", [T("2xi1"), T("2xf32"), T("2xf32")],
        [T("2xf32")]))
  bad(op("stablehlo.select", [T("3xi1"), T("2xf32"), T("2xf32")],
         [T("2xf32")]), "select_c1")
  bad(op("stablehlo.select", [T("i1"), T("2xf32"), T("2xi32")],
         [T("2xf32")]), "select_c2")
  ok(op("stablehlo.clamp", [T("f32"), T("3xf32"), T("3xf32")], [T("3xf32")]))
  bad(op("stablehlo.clamp", [T("2xf32"), T("3xf32"), T("f32")],
         [T("3xf32")]), "clamp_c1")
  bad(op("stablehlo.clamp", [T("f32"), T("3xf32"), T("2xf32")],
         [T("3xf32")]), "clamp_c2")
  bad(op("stablehlo.clamp", [T("i32"), T("3xf32"), T("f32")],
         [T("3xf32")]), "clamp_c3")
  bad(op("stablehlo.clamp", [T("f32"), T("3xf32"), T("f32")],
         [T("3xf64")]), "clamp_c4")


def test_convert_reduce_precision():
  ok(op("stablehlo.convert", [T("2xf32")], [T("2xi8")]))
  bad(op("stablehlo.convert", [T("2xf32")], [T("3xi8")]), "convert_c1")
  rp = dict(exponent_bits=i32(5), mantissa_bits=i32(10))
  ok(op("stablehlo.reduce_precision", [T("2xf32")], [T("2xf32")], **rp))
  bad(op("stablehlo.reduce_precision", [T("2xf32")], [T("2xf16")], **rp),
      "reduce_precision_c1")
  bad(op("stablehlo.reduce_precision", [T("2xf32")], [T("2xf32")],
         exponent_bits=i32(0), mantissa_bits=i32(1)), "reduce_precision_c2")
  bad(op("stablehlo.reduce_precision", [T("2xf32")], [T("2xf32")],
         exponent_bits=i32(1), mantissa_bits=i32(-1)), "reduce_precision_c3")


@pytest.mark.parametrize("src,dst,cid", [
    ("2xf32", "2xi32", None), ("2xf32", "2x4xi8", None),
    ("2x2xi32", "2xi64", None), ("2xf32", "3xi32", "c1"),
    ("2xf32", "2x2xi8", "c1"), ("2x3xi32", "2xi64", "c1"),
    ("2xi64", "2xcomplex<f32>", "c2")])
def test_bitcast_convert(src, dst, cid):
  o = op("stablehlo.bitcast_convert", [T(src)], [T(dst)])
  if cid is None:
    ok(o)
  else:
    bad(o, f"bitcast_convert_{cid}")


def check(o, cid):
  if cid is None:
    ok(o)
  else:
    msg = tt.error_of(o)
    assert msg is not None and cid in msg, msg


def test_map():
  comp = region([T("f32"), T("f32")], [T("f32")])
  check(op("stablehlo.map", [T("2xf32"), T("2xf32")], [T("2xf32")],
           regions=[comp], dimensions=i64s(0)), None)
  check(op("stablehlo.map", [T("2xf32"), T("3xf32")], [T("2xf32")],
           regions=[comp], dimensions=i64s(0)), "map_c1")
  check(op("stablehlo.map", [], [T("2xf32")],
           regions=[comp], dimensions=i64s(0)), "map_c2")
  check(op("stablehlo.map", [T("2xf32"), T("2xf32")], [T("2xf32")],
           regions=[comp], dimensions=i64s(1)), "map_c3")
  check(op("stablehlo.map", [T("2xf32"), T("2xf32")], [T("2xi32")],
           regions=[comp], dimensions=i64s(0)), "map_c4")


def test_chlo_elementwise():
  check(op("chlo.erf", [T("2xf32")], [T("2xf32")]), None)
  check(op("chlo.erf", [T("2xf32")], [T("3xf32")]), "chlo.erf_schema")
  check(op("chlo.mulhi", [T("2xi8"), T("2xi8")], [T("2xi8")]), None)
