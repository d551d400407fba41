"""Verifier tests for misc spec ops (constant, rng, tuples, custom_call,
composite), quantization, other dialects, and the module walker."""

import pytest

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.ops import testing as tt
from stablehlo._src.ops import verify
from stablehlo._src.ops.testing import T, dense, enum, i32, op
from stablehlo._src.ops.testing import quant, region


def check(o, cid):
  msg = tt.error_of(o)
  if cid is None:
    assert msg is None, msg
  else:
    assert msg is not None and cid in msg, msg


def test_constant():
  check(op("stablehlo.constant", [], [T("2xi64")], value=dense([1, 2])), None)
  check(op("stablehlo.constant", [], [T("3xi64")], value=dense([1, 2])),
        "constant_c1")
  check(op("stablehlo.constant", [], [T("2", quant())],
           value=dense([1, 2], T("2xi8"))), None)


def test_rng():
  def rng(a_="f32", b_="f32", dst="2x3xf32", dist="UNIFORM", shape=None):
    shp = shape.result if shape is not None else T("2xi64")
    return op("stablehlo.rng", [T(a_), T(b_), shp], [T(dst)],
              rng_distribution=enum("rng_distribution", dist))
  check(rng(), None)
  check(rng(b_="f64"), "rng_c1")
  check(rng("i32", "i32", "2x3xi32", "NORMAL"), "rng_c2")
  const = op("stablehlo.constant", [], [T("2xi64")], value=dense([2, 4]))
  check(rng(shape=const), "rng_c3")
  check(rng(dst="2xf32"), "rng_c3")


def test_rng_bit_generator():
  def rbg(state="2xui64", out_state="2xui64", algo="THREE_FRY"):
    return op("stablehlo.rng_bit_generator", [T(state)],
              [T(out_state), T("4xui32")],
              rng_algorithm=enum("rng_algorithm", algo))
  check(rbg(), None)
  check(rbg("3xui64", "3xui64", "PHILOX"), None)
  check(rbg(out_state="3xui64"), "rng_bit_generator_c1")
  check(rbg("3xui64", "3xui64"), "rng_bit_generator_c2")


def test_tuples():
  tup = t.TupleType((T("f32"), T("2xi32")))
  check(op("stablehlo.tuple", [T("f32"), T("2xi32")], [tup]), None)
  check(op("stablehlo.tuple", [T("f32")], [tup]), "tuple_c1")
  check(op("stablehlo.get_tuple_element", [tup], [T("2xi32")],
           index=i32(1)), None)
  check(op("stablehlo.get_tuple_element", [tup], [T("2xi32")],
           index=i32(2)), "get_tuple_element_c1")
  check(op("stablehlo.get_tuple_element", [tup], [T("f32")], index=i32(1)),
        "get_tuple_element_c2")


def test_quantize_dequantize_and_quantized_types():
  q = quant()
  check(op("stablehlo.uniform_quantize", [T("2xf32")], [T("2", q)]), None)
  check(op("stablehlo.uniform_quantize", [T("2xf32")], [T("3", q)]),
        "uniform_quantize_c1")
  check(op("stablehlo.uniform_quantize", [T("2xf16")], [T("2", q)]),
        "uniform_quantize_c2")
  check(op("stablehlo.uniform_dequantize", [T("2", q)], [T("2xf32")]), None)
  check(op("stablehlo.uniform_dequantize", [T("2", q)], [T("3xf32")]),
        "uniform_dequantize_c1")
  check(op("stablehlo.uniform_dequantize", [T("2", q)], [T("2xf16")]),
        "uniform_dequantize_c2")
  bad_q = quant(scales=(0.0,))
  check(op("stablehlo.uniform_quantize", [T("2xf32")], [T("2", bad_q)]),
        "quantized_type")
  check(op("stablehlo.uniform_quantize", [T("2xf32")],
           [T("2", quant(zero_points=(300,)))]), "quantized_type")


def test_custom_call():
  check(op("stablehlo.custom_call", [T("2xf32")], [T("2xf32")],
           call_target_name=a.StringAttr("foo")), None)
  check(op("stablehlo.custom_call", [T("2xf32")], [T("2xf32")]),
        "custom_call_schema")


def _composite_module(name="my.op", in_t="2xf32", out_t="2xf32",
                      decomposition="dec"):
  dec = tt.func("dec", [T("2xf32")], [T("2xf32")])
  comp = [None]

  def body(block):
    o = op("stablehlo.composite", [block.arguments[0]], [T(out_t)],
           name=a.StringAttr(name), decomposition=a.SymbolRefAttr(
               decomposition))
    block.append(o)
    comp[0] = o
    return [block.arguments[0]]

  main = tt.func("main", [T(in_t)], [T(in_t)], body)
  return tt.module(dec, main), comp[0]


@pytest.mark.parametrize("kw,cid", [
    ({}, None), ({"name": "noname"}, "composite_c1"),
    ({"decomposition": "nope"}, "composite_c2"),
    ({"in_t": "3xf32"}, "composite_c3"), ({"out_t": "3xf32"}, "composite_c4"),
])
def test_composite(kw, cid):
  _, comp = _composite_module(**kw)
  check(comp, cid)


def test_verify_module_and_unregistered():
  m, _ = _composite_module()
  verify.verify_module(m)
  # A bad op nested in a function is found by the walk.
  def body(block):
    block.append(op("stablehlo.abs", [block.arguments[0]], [T("3xf32")]))
    return [block.arguments[0]]
  m = tt.module(tt.func("main", [T("2xf32")], [T("2xf32")], body))
  with pytest.raises(verify.VerificationError, match="abs_c1"):
    verify.verify_module(m)
  # Unknown ops: error unless their dialect may stay unregistered.
  def body2(block):
    block.append(op("mydialect.thing", [block.arguments[0]], []))
    return [block.arguments[0]]
  m = tt.module(tt.func("main", [T("2xf32")], [T("2xf32")], body2))
  with pytest.raises(verify.VerificationError, match="not a registered"):
    verify.verify_module(m)
  verify.verify_module(m, allow_unregistered={"mydialect"})


def test_func_dialect():
  m = tt.module(tt.func("main", [T("2xf32")], [T("2xf32")]))
  verify.verify_module(m)
  m = tt.module(tt.func("main", [T("2xf32")], [T("3xf32")],
                        lambda block: [block.arguments[0]]))
  with pytest.raises(verify.VerificationError, match="func.return_schema"):
    verify.verify_module(m)

  def body(block):
    call = op("func.call", [block.arguments[0]], [T("2xf32")],
              callee=a.SymbolRefAttr("missing"))
    block.append(call)
    return [call.result]
  m = tt.module(tt.func("main", [T("2xf32")], [T("2xf32")], body))
  with pytest.raises(verify.VerificationError, match="is not defined"):
    verify.verify_module(m)


def test_ml_program_check_ops():
  check(op("check.expect_eq", [T("2xf32"), T("2xf32")], []), None)
  check(op("check.expect_eq", [T("2xf32"), T("2xi32")], []),
        "check.expect_eq_schema")
  check(op("check.expect_eq_const", [T("2xi64")], [], value=dense([1, 2])),
        None)
  g = op("ml_program.global", [], [], sym_name=a.StringAttr("g"),
         type=a.TypeAttr(T("2xf32")))

  def body(block):
    ld = op("ml_program.global_load", [], [T("3xf32")],
            **{"global": a.SymbolRefAttr("g")})
    block.append(ld)
    return [block.arguments[0]]
  m = tt.module(g, tt.func("main", [T("2xf32")], [T("2xf32")], body))
  with pytest.raises(verify.VerificationError,
                     match="ml_program.global_load_schema"):
    verify.verify_module(m)


def test_block_region_helpers():
  r = region([T("f32")], [T("f32")])
  assert isinstance(r, core.Region)
  assert r.blocks[0].terminator.name == "stablehlo.return"
