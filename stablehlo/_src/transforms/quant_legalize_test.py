"""Tests for quant_legalize: quantized programs rewritten to integer / float
arithmetic compute the same storage integers as the interpreter computes on
the quantized program (its quantization kernels are written independently
of this pass), no quantized type is left, and programs without quantized
types are left alone."""

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import conformance_run
from stablehlo._src.interpreter import lit
from stablehlo._src.ir import types as t
from stablehlo._src.ops import verify
from stablehlo._src.transforms import quant_legalize
from support import env


def _legalized(src: str):
  module = text.parse_module(src, "q.mlir")
  assert quant_legalize.run(module)
  # The result prints, parses back and verifies.
  printed = text.print_module(module)
  again = text.parse_module(printed, "legalized.mlir")
  verify.verify_module(again)
  return again


def _no_quantized_types(module) -> bool:
  for op in module.walk():
    types = [v.type for v in op.results] + [v.type for v in op.operands]
    for region in op.regions:
      for block in region.blocks:
        types += [v.type for v in block.arguments]
    for ty in types:
      if not isinstance(ty, t.TupleType) and isinstance(
          t.element_type_of(ty), t.QuantizedType):
        return False
  return True


def _run(module, args):
  return interpreter.Interpreter(module).run("main", list(args))


def _check_same(src: str, *args):
  """The legalized program's results equal the interpreter's results on
  the quantized program, bit for bit."""
  want = _run(text.parse_module(src, "q.mlir"), args)
  module = _legalized(src)
  assert _no_quantized_types(module)
  got = _run(module, args)
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert np.asarray(g).dtype == np.asarray(w).dtype
    np.testing.assert_array_equal(g, w)
  return got


def _ints(rng, lo, hi, shape, dt=np.int8):
  return rng.integers(lo, hi, shape).astype(dt)


# -- hand-computed values --------------------------------------------------------


def test_per_axis_quantize_matches_the_spec_example():
  module = _legalized("""
  func.func @main(%x: tensor<2xf32>) -> (tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>, tensor<2xf32>) {
    %q = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>
    %d = stablehlo.uniform_dequantize %q : (tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>) -> tensor<2xf32>
    return %q, %d : tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>, tensor<2xf32>
  }""")
  fty = module.lookup("main").attr("function_type").value
  assert fty.results[0] == t.RankedTensorType((2,), t.IntegerType(8))
  q, d = _run(module, [np.array([4.0, 15.0], np.float32)])
  # 4 / 0.1 - 30 = 10 and 15 / 0.5 - 20 = 10; back: 40 * 0.1, 30 * 0.5.
  assert q.dtype == np.int8 and q.tolist() == [10, 10]
  np.testing.assert_allclose(d, [4.0, 15.0], rtol=1e-6)


def test_quantize_rounds_half_to_even_and_clamps():
  module = _legalized("""
  func.func @main(%x: tensor<6xf32>) -> tensor<6x!quant.uniform<i8:f32, 0.5>> {
    %q = stablehlo.uniform_quantize %x : (tensor<6xf32>) -> tensor<6x!quant.uniform<i8:f32, 0.5>>
    return %q : tensor<6x!quant.uniform<i8:f32, 0.5>>
  }""")
  (q,) = _run(module, [np.array([1.25, 1.75, -1.25, 0, 100, -100],
                                np.float32)])
  assert q.tolist() == [2, 4, -2, 0, 127, -128]


def test_quantized_add_requantizes_in_integers():
  # The interpret corpus' example: 1 / 0.1 - 30 = -20, 2 -> -10 (lhs);
  # 3 / 0.5 - 20 = -14, 4 -> -12 (rhs). The lhs requantized to scale 0.5,
  # zp -20: -20 * 0.2 - 14 = -18, -10 * 0.2 - 14 = -16; sums minus the zp:
  # -18 - 14 + 20 = -12, -16 - 12 + 20 = -8.
  module = _legalized("""
  func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.5:-20>> {
    %qa = stablehlo.uniform_quantize %a : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.1:-30>>
    %qb = stablehlo.uniform_quantize %b : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.5:-20>>
    %r = stablehlo.add %qa, %qb : (tensor<2x!quant.uniform<i8:f32, 0.1:-30>>, tensor<2x!quant.uniform<i8:f32, 0.5:-20>>) -> tensor<2x!quant.uniform<i8:f32, 0.5:-20>>
    return %r : tensor<2x!quant.uniform<i8:f32, 0.5:-20>>
  }""")
  (r,) = _run(module, [np.array([1.0, 2.0], np.float32),
                       np.array([3.0, 4.0], np.float32)])
  assert r.tolist() == [-12, -8]


# -- the same results as the interpreter ------------------------------------------


@pytest.mark.parametrize("src_q,dst_q", [
    ("!quant.uniform<i8:f32, 0.3:5>", "!quant.uniform<i8:f32, 0.7:-3>"),
    ("!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>",
     "!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>"),
    ("!quant.uniform<i32:f32, 0.01:100>", "!quant.uniform<i8<-100:100>:f32, 0.5:1>"),
    ("!quant.uniform<u8:f32, 0.25:128>", "!quant.uniform<i16:f32, 0.001>"),
])
def test_quantize_requantize_dequantize(src_q, dst_q):
  rng = np.random.default_rng(0)
  # Per-axis types quantize along dimension 0 (size 2).
  x = (rng.standard_normal(2 * 5) * 20).astype(np.float32).reshape(2, 5)
  n, m = x.shape
  _check_same(f"""
  func.func @main(%x: tensor<{n}x{m}xf32>) -> (tensor<{n}x{m}x{src_q}>, tensor<{n}x{m}x{dst_q}>, tensor<{n}x{m}xf32>, tensor<{n}x{m}xbf16>) {{
    %a = stablehlo.uniform_quantize %x : (tensor<{n}x{m}xf32>) -> tensor<{n}x{m}x{src_q}>
    %b = stablehlo.uniform_quantize %a : (tensor<{n}x{m}x{src_q}>) -> tensor<{n}x{m}x{dst_q}>
    %c = stablehlo.uniform_dequantize %b : (tensor<{n}x{m}x{dst_q}>) -> tensor<{n}x{m}xf32>
    %d = stablehlo.uniform_dequantize %a : (tensor<{n}x{m}x{src_q}>) -> tensor<{n}x{m}xbf16>
    return %a, %b, %c, %d : tensor<{n}x{m}x{src_q}>, tensor<{n}x{m}x{dst_q}>, tensor<{n}x{m}xf32>, tensor<{n}x{m}xbf16>
  }}""", x)


def test_add_per_tensor_and_per_axis():
  rng = np.random.default_rng(1)
  a, b = _ints(rng, -128, 127, (3, 4)), _ints(rng, -128, 127, (3, 4))
  qa, qb, qo = ("!quant.uniform<i8:f32, 0.3:5>", "!quant.uniform<i8:f32, 0.2:-7>",
                "!quant.uniform<i8:f32, 0.4:2>")
  _check_same(f"""
  func.func @main(%a: tensor<3x4xi8>, %b: tensor<3x4xi8>) -> tensor<3x4x{qo}> {{
    %x = stablehlo.bitcast_convert %a : (tensor<3x4xi8>) -> tensor<3x4x{qa}>
    %y = stablehlo.bitcast_convert %b : (tensor<3x4xi8>) -> tensor<3x4x{qb}>
    %r = stablehlo.add %x, %y : (tensor<3x4x{qa}>, tensor<3x4x{qb}>) -> tensor<3x4x{qo}>
    return %r : tensor<3x4x{qo}>
  }}""", a, b)
  q32 = "!quant.uniform<i32:f32:1, {0.5:3, 0.25:-1, 1.0:0, 2.0:7}>"
  a32 = _ints(rng, -1000, 1000, (3, 4), np.int32)
  b32 = _ints(rng, -1000, 1000, (3, 4), np.int32)
  _check_same(f"""
  func.func @main(%a: tensor<3x4xi32>, %b: tensor<3x4xi32>) -> tensor<3x4x{q32}> {{
    %x = stablehlo.bitcast_convert %a : (tensor<3x4xi32>) -> tensor<3x4x{q32}>
    %y = stablehlo.bitcast_convert %b : (tensor<3x4xi32>) -> tensor<3x4x{q32}>
    %r = stablehlo.add %x, %y : tensor<3x4x{q32}>
    return %r : tensor<3x4x{q32}>
  }}""", a32, b32)


def test_elementwise_ops_dequantize_compute_quantize_and_native_max():
  rng = np.random.default_rng(2)
  a, b = _ints(rng, -128, 127, (8,)), _ints(rng, -128, 127, (8,))
  q = "!quant.uniform<i8:f32, 0.05:-3>"
  _check_same(f"""
  func.func @main(%a: tensor<8xi8>, %b: tensor<8xi8>) -> (tensor<8x{q}>, tensor<8x{q}>, tensor<8x{q}>, tensor<8xi1>) {{
    %x = stablehlo.bitcast_convert %a : (tensor<8xi8>) -> tensor<8x{q}>
    %y = stablehlo.bitcast_convert %b : (tensor<8xi8>) -> tensor<8x{q}>
    %t = stablehlo.tanh %x : tensor<8x{q}>
    %m = stablehlo.multiply %x, %y : tensor<8x{q}>
    %mx = stablehlo.maximum %x, %y : tensor<8x{q}>
    %c = stablehlo.compare LT, %x, %y : (tensor<8x{q}>, tensor<8x{q}>) -> tensor<8xi1>
    return %t, %m, %mx, %c : tensor<8x{q}>, tensor<8x{q}>, tensor<8x{q}>, tensor<8xi1>
  }}""", a, b)


def test_data_movement_and_regions_run_on_storage():
  rng = np.random.default_rng(3)
  a = _ints(rng, -128, 127, (2, 3))
  q = "!quant.uniform<i8:f32, 0.5:1>"
  _check_same(f"""
  func.func @main(%a: tensor<2x3xi8>) -> (tensor<3x2x{q}>, tensor<2x{q}>) {{
    %x = stablehlo.bitcast_convert %a : (tensor<2x3xi8>) -> tensor<2x3x{q}>
    %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3x{q}>) -> tensor<3x2x{q}>
    %z = stablehlo.constant() {{value = dense<1> : tensor<i8>}} : () -> tensor<{q}>
    %r = stablehlo.reduce(%x init: %z) across dimensions = [1] : (tensor<2x3x{q}>, tensor<{q}>) -> tensor<2x{q}>
     reducer(%p: tensor<{q}>, %s: tensor<{q}>) {{
      %m = stablehlo.maximum %p, %s : tensor<{q}>
      stablehlo.return %m : tensor<{q}>
    }}
    return %t, %r : tensor<3x2x{q}>, tensor<2x{q}>
  }}""", a)


@pytest.mark.parametrize("zl,zr,zo,so", [(0, 0, 0, 0.125), (2, 0, 5, 0.125),
                                         (-3, 4, -1, 0.0625),
                                         (2, -1, 0, 0.0833333)])
def test_static_dot_general(zl, zr, zo, so):
  rng = np.random.default_rng(4)
  a = _ints(rng, -100, 100, (2, 3, 4))
  b = _ints(rng, -100, 100, (2, 4, 5))
  ql, qr = f"!quant.uniform<i8:f32, 0.5:{zl}>", f"!quant.uniform<i8:f32, 0.25:{zr}>"
  qo = f"!quant.uniform<i32:f32, {so}:{zo}>"
  _check_same(f"""
  func.func @main(%a: tensor<2x3x4xi8>, %b: tensor<2x4x5xi8>) -> tensor<2x3x5x{qo}> {{
    %x = stablehlo.bitcast_convert %a : (tensor<2x3x4xi8>) -> tensor<2x3x4x{ql}>
    %y = stablehlo.bitcast_convert %b : (tensor<2x4x5xi8>) -> tensor<2x4x5x{qr}>
    %r = stablehlo.dot_general %x, %y, batching_dims = [0] x [0], contracting_dims = [2] x [1]
        : (tensor<2x3x4x{ql}>, tensor<2x4x5x{qr}>) -> tensor<2x3x5x{qo}>
    return %r : tensor<2x3x5x{qo}>
  }}""", a, b)


def test_hybrid_and_per_axis_dot_general():
  rng = np.random.default_rng(5)
  a = rng.standard_normal((2, 3)).astype(np.float32)
  b = _ints(rng, -100, 100, (3, 4))
  qr = "!quant.uniform<i8:f32:1, {0.5:1, 0.25:0, 0.1:-2, 1.0:3}>"
  _check_same(f"""
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xi8>) -> tensor<2x4xf32> {{
    %y = stablehlo.bitcast_convert %b : (tensor<3x4xi8>) -> tensor<3x4x{qr}>
    %r = stablehlo.dot_general %a, %y, contracting_dims = [1] x [0]
        : (tensor<2x3xf32>, tensor<3x4x{qr}>) -> tensor<2x4xf32>
    return %r : tensor<2x4xf32>
  }}""", a, b)
  ai = _ints(rng, -100, 100, (2, 3))
  ql = "!quant.uniform<i8:f32, 0.5:2>"
  qr = "!quant.uniform<i8:f32:1, {0.5, 0.25, 0.1, 1.0}>"
  qo = "!quant.uniform<i32:f32:1, {0.25, 0.125, 0.05, 0.5}>"
  _check_same(f"""
  func.func @main(%a: tensor<2x3xi8>, %b: tensor<3x4xi8>) -> tensor<2x4x{qo}> {{
    %x = stablehlo.bitcast_convert %a : (tensor<2x3xi8>) -> tensor<2x3x{ql}>
    %y = stablehlo.bitcast_convert %b : (tensor<3x4xi8>) -> tensor<3x4x{qr}>
    %r = stablehlo.dot_general %x, %y, contracting_dims = [1] x [0]
        : (tensor<2x3x{ql}>, tensor<3x4x{qr}>) -> tensor<2x4x{qo}>
    return %r : tensor<2x4x{qo}>
  }}""", ai, b)


@pytest.mark.parametrize("window,lq,out", [
    ("pad = [[1, 1], [1, 1]]", "!quant.uniform<i8:f32, 0.5:4>", "1x4x5x3"),
    ("stride = [2, 1], pad = [[0, 1], [-1, 2]]",
     "!quant.uniform<i8:f32, 0.3:-6>", "1x2x4x3"),
    # lhs dilation: the dequantize -> convolution -> quantize fallback.
    ("lhs_dilate = [2, 1]", "!quant.uniform<i8:f32, 0.5:4>", "1x4x3x3"),
])
def test_convolution_integer_path_and_fallback(window, lq, out):
  rng = np.random.default_rng(6)
  x = _ints(rng, -20, 20, (1, 3, 4, 2))
  k = _ints(rng, -5, 5, (2, 2, 2, 3))
  rq, oq = "!quant.uniform<i8:f32, 0.5>", "!quant.uniform<i32:f32, 0.2:7>"
  _check_same(f"""
  func.func @main(%a: tensor<1x3x4x2xi8>, %b: tensor<2x2x2x3xi8>) -> tensor<{out}x{oq}> {{
    %x = stablehlo.bitcast_convert %a : (tensor<1x3x4x2xi8>) -> tensor<1x3x4x2x{lq}>
    %y = stablehlo.bitcast_convert %b : (tensor<2x2x2x3xi8>) -> tensor<2x2x2x3x{rq}>
    %r = stablehlo.convolution(%x, %y) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
        window = {{{window}}}
        {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}
        : (tensor<1x3x4x2x{lq}>, tensor<2x2x2x3x{rq}>) -> tensor<{out}x{oq}>
    return %r : tensor<{out}x{oq}>
  }}""", x, k)


# -- must not fire -------------------------------------------------------------


def test_program_without_quantized_types_is_unchanged():
  src = """
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.add %x, %x : tensor<2xf32>
    return %0 : tensor<2xf32>
  }"""
  module = text.parse_module(src, "f.mlir")
  before = text.print_module(module)
  assert not quant_legalize.run(module)
  assert text.print_module(module) == before


def test_dynamic_quantized_shapes_are_unimplemented():
  module = text.parse_module("""
  func.func @main(%x: tensor<?xf32>) -> tensor<?x!quant.uniform<i8:f32, 0.5>> {
    %q = stablehlo.uniform_quantize %x : (tensor<?xf32>) -> tensor<?x!quant.uniform<i8:f32, 0.5>>
    return %q : tensor<?x!quant.uniform<i8:f32, 0.5>>
  }""", "d.mlir")
  with pytest.raises(NotImplementedError, match="dynamic shapes"):
    quant_legalize.run(module)


# -- corpus ----------------------------------------------------------------------


def _legalize_and_run_corpus_file(suite, relpath) -> int:
  root = env.stablehlo_corpus(suite)
  if root is None:
    pytest.skip(env.missing_corpus_reason(suite))
  path = root / relpath
  if not path.exists():
    pytest.skip(f"{relpath} not in the corpus")
  src = path.read_text(encoding="utf-8")
  n = 0
  for case, offset in lit.split(src, lit.invocations(src)[0]):
    module = text.parse_module(case, str(path), offset)
    if quant_legalize.run(module):
      assert _no_quantized_types(module)
      n += 1
    conformance_run.run_case(text.print_module(module), str(path))
  return n


@pytest.mark.parametrize("suite,relpath", [
    ("interpret", "quantized_ops.mlir"),
    ("testdata", "quantized/add_qi8.mlir"),
    ("testdata", "quantized/convolution_qi8.mlir"),
    ("testdata", "quantized/tanh_qi8.mlir"),
])
def test_corpus_programs_pass_their_checks_after_legalization(suite,
                                                               relpath):
  assert _legalize_and_run_corpus_file(suite, relpath) >= 1
