"""Tests for quantized execution: uniform_quantize / uniform_dequantize, the
integer lowerings of add / dot_general / convolution, hybrid ops, the
dequantize -> op -> quantize fallback and storage-level data movement.
Expected storage values are worked out by hand from the formulas in the
module docstring."""

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import corpus_testing
from stablehlo._src.interpreter import evaluator
from stablehlo._src.interpreter import kernels_quantization as kq
from stablehlo._src.ir import types as t
from stablehlo._src.ops import registry
from support import env


def _run(src, *args):
  module = text.parse_module(src, "q.mlir")
  return interpreter.Interpreter(module).run("main", list(args))


def _needs(*names):
  for n in names:
    d = registry.lookup(n)
    if d is None or d.interpreter is None:
      pytest.skip(f"no interpreter kernel for {n} yet")


def test_hook_is_installed():
  assert evaluator.quantized_kernel_hook is kq.quantized_kernel


Q = "!quant.uniform<i8:f32, 0.5>"
Q_ZP = "!quant.uniform<i8:f32, 0.1:-30>"


def _quantize_src(n, qt):
  return f"""
  func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xi8> {{
    %q = stablehlo.uniform_quantize %x : (tensor<{n}xf32>) -> tensor<{n}x{qt}>
    %s = stablehlo.bitcast_convert %q : (tensor<{n}x{qt}>) -> tensor<{n}xi8>
    return %s : tensor<{n}xi8>
  }}"""


def test_quantize_rounds_half_to_even_and_clamps():
  x = np.array([1.25, 1.75, -1.25, 0.0, 100.0, -100.0], np.float32)
  (out,) = _run(_quantize_src(6, Q), x)
  # x / 0.5: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0, 200 -> 127, -200 -> -128.
  assert out.tolist() == [2, 4, -2, 0, 127, -128]
  (out,) = _run(_quantize_src(3, Q_ZP), np.array([4.0, 15.0, -100.0],
                                                  np.float32))
  # 4 / 0.1 - 30 = 10, 15 / 0.1 - 30 = 120, clamped -1030 -> -128.
  assert out.tolist() == [10, 120, -128]


def test_quantize_respects_storage_min_max():
  qt = "!quant.uniform<i8<-100:100>:f32, 1.0>"
  (out,) = _run(_quantize_src(3, qt), np.array([200, -200, 50], np.float32))
  assert out.tolist() == [100, -100, 50]
  qu = "!quant.uniform<u8:f32, 0.5:10>"
  (out,) = _run(f"""
  func.func @main(%x: tensor<3xf32>) -> tensor<3xui8> {{
    %q = stablehlo.uniform_quantize %x : (tensor<3xf32>) -> tensor<3x{qu}>
    %s = stablehlo.bitcast_convert %q : (tensor<3x{qu}>) -> tensor<3xui8>
    return %s : tensor<3xui8>
  }}""", np.array([-10, 0, 200], np.float32))
  assert out.dtype == np.uint8 and out.tolist() == [0, 10, 255]


def test_per_axis_quantize_dequantize_and_requantize():
  qa = "!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>"
  qb = "!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>"
  q, deq, req = _run(f"""
  func.func @main(%x: tensor<2xf32>) -> (tensor<2xi8>, tensor<2xf32>, tensor<2xi8>) {{
    %q = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x{qa}>
    %d = stablehlo.uniform_dequantize %q : (tensor<2x{qa}>) -> tensor<2xf32>
    %r = stablehlo.uniform_quantize %q : (tensor<2x{qa}>) -> tensor<2x{qb}>
    %s = stablehlo.bitcast_convert %q : (tensor<2x{qa}>) -> tensor<2xi8>
    %t = stablehlo.bitcast_convert %r : (tensor<2x{qb}>) -> tensor<2xi8>
    return %s, %d, %t : tensor<2xi8>, tensor<2xf32>, tensor<2xi8>
  }}""", np.array([4.0, 15.0], np.float32))
  # ch0: 4 / 0.1 - 30 = 10; ch1: 15 / 0.5 - 20 = 10.
  assert q.tolist() == [10, 10]
  np.testing.assert_allclose(deq, [4.0, 15.0], rtol=1e-6)
  # ch0: 10 * 1 + (-20 + 30) = 20; ch1: 10 * 2.5 + (-30 + 20 * 2.5) = 45.
  assert req.tolist() == [20, 45]


def test_dequantize_is_exact_for_binary_scales():
  x = np.array([7, -128, 127], np.int8)
  (out,) = _run("""
  func.func @main(%s: tensor<3xi8>) -> tensor<3xf32> {
    %q = stablehlo.bitcast_convert %s : (tensor<3xi8>) -> tensor<3x!quant.uniform<i8:f32, 0.5:3>>
    %d = stablehlo.uniform_dequantize %q : (tensor<3x!quant.uniform<i8:f32, 0.5:3>>) -> tensor<3xf32>
    return %d : tensor<3xf32>
  }""", x)
  assert out.tolist() == [2.0, -65.5, 62.0]


def test_requantize_clamps_narrow_storage():
  x = np.array([100, -100], np.int8)
  (out,) = _run("""
  func.func @main(%s: tensor<2xi8>) -> tensor<2xi8> {
    %q = stablehlo.bitcast_convert %s : (tensor<2xi8>) -> tensor<2x!quant.uniform<i8:f32, 1.0>>
    %r = stablehlo.uniform_quantize %q : (tensor<2x!quant.uniform<i8:f32, 1.0>>) -> tensor<2x!quant.uniform<i8:f32, 0.5>>
    %t = stablehlo.bitcast_convert %r : (tensor<2x!quant.uniform<i8:f32, 0.5>>) -> tensor<2xi8>
    return %t : tensor<2xi8>
  }""", x)
  assert out.tolist() == [127, -128]


def test_add_requantizes_to_the_result_type_in_integers():
  _needs("stablehlo.add")
  qa, qb = Q_ZP, "!quant.uniform<i8:f32, 0.5:-20>"
  (out,) = _run(f"""
  func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xi8> {{
    %qa = stablehlo.uniform_quantize %a : (tensor<2xf32>) -> tensor<2x{qa}>
    %qb = stablehlo.uniform_quantize %b : (tensor<2xf32>) -> tensor<2x{qb}>
    %r = stablehlo.add %qa, %qb : (tensor<2x{qa}>, tensor<2x{qb}>) -> tensor<2x{qb}>
    %s = stablehlo.bitcast_convert %r : (tensor<2x{qb}>) -> tensor<2xi8>
    return %s : tensor<2xi8>
  }}""", np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32))
  # a: [-20, -10] requantized by 0.2 with zp shift -14 -> [-18, -16];
  # b: [-14, -12]; sum - (-20) -> [-12, -8].
  assert out.tolist() == [-12, -8]


def _dot_src(lq, rq, oq):
  return f"""
  func.func @main(%a: tensor<2x3xi8>, %b: tensor<3x2xi8>) -> tensor<2x2xi32> {{
    %qa = stablehlo.bitcast_convert %a : (tensor<2x3xi8>) -> tensor<2x3x{lq}>
    %qb = stablehlo.bitcast_convert %b : (tensor<3x2xi8>) -> tensor<3x2x{rq}>
    %r = stablehlo.dot_general %qa, %qb, contracting_dims = [1] x [0]
        : (tensor<2x3x{lq}>, tensor<3x2x{rq}>) -> tensor<2x2x{oq}>
    %s = stablehlo.bitcast_convert %r : (tensor<2x2x{oq}>) -> tensor<2x2xi32>
    return %s : tensor<2x2xi32>
  }}"""


def test_static_dot_general_integer_arithmetic_with_zero_points():
  a = np.array([[1, -2, 3], [4, 5, -6]], np.int8)
  b = np.array([[7, 1], [-8, 2], [9, 3]], np.int8)
  exact = (a.astype(np.int64) - 2) @ b.astype(np.int64)
  # combined scale 0.5 * 0.25 / 0.125 = 1: the exact integer result + zp.
  (out,) = _run(_dot_src("!quant.uniform<i8:f32, 0.5:2>",
                         "!quant.uniform<i8:f32, 0.25>",
                         "!quant.uniform<i32:f32, 0.125:5>"), a, b)
  assert out.tolist() == (exact + 5).tolist()
  # combined scale 2: both the raw product and the zero-point offset are
  # scaled (exactly, here) before adding the result zero point.
  (out,) = _run(_dot_src("!quant.uniform<i8:f32, 0.5:2>",
                         "!quant.uniform<i8:f32, 0.25>",
                         "!quant.uniform<i32:f32, 0.0625:-1>"), a, b)
  assert out.tolist() == (2 * exact - 1).tolist()
  # combined scale 1.5: each part is truncated toward zero after scaling.
  a = np.array([[1, 2, 0], [-1, 0, -2]], np.int8)
  b = np.array([[5, 1], [0, 1], [0, 1]], np.int8)
  raw = a.astype(np.int64) @ b.astype(np.int64)  # [[5, 3], [-5, -3]]
  offset = 2 * b.astype(np.int64).sum(axis=0)[None, :]
  trunc = lambda v: np.trunc(v * 1.5).astype(np.int64)
  (out,) = _run(_dot_src("!quant.uniform<i8:f32, 0.5:2>",
                         "!quant.uniform<i8:f32, 0.25>",
                         "!quant.uniform<i32:f32, 0.083333333333333329>"),
                a, b)
  assert out.tolist() == (trunc(raw) - trunc(offset)).tolist()


def test_per_axis_rhs_dot_general():
  a = np.array([[1, 2, 3]], np.int8)
  b = np.array([[1, 2], [3, 4], [5, 6]], np.int8)
  (out,) = _run("""
  func.func @main(%a: tensor<1x3xi8>, %b: tensor<3x2xi8>) -> tensor<1x2xi32> {
    %qa = stablehlo.bitcast_convert %a : (tensor<1x3xi8>) -> tensor<1x3x!quant.uniform<i8:f32, 1.0:1>>
    %qb = stablehlo.bitcast_convert %b : (tensor<3x2xi8>) -> tensor<3x2x!quant.uniform<i8:f32:1, {1.0, 2.0}>>
    %r = stablehlo.dot_general %qa, %qb, contracting_dims = [1] x [0]
        : (tensor<1x3x!quant.uniform<i8:f32, 1.0:1>>, tensor<3x2x!quant.uniform<i8:f32:1, {1.0, 2.0}>>)
        -> tensor<1x2x!quant.uniform<i32:f32:1, {1.0, 2.0}>>
    %s = stablehlo.bitcast_convert %r : (tensor<1x2x!quant.uniform<i32:f32:1, {1.0, 2.0}>>) -> tensor<1x2xi32>
    return %s : tensor<1x2xi32>
  }""", a, b)
  assert out.tolist() == ((a.astype(int) - 1) @ b.astype(int)).tolist()


def test_hybrid_dot_general_dequantizes_the_rhs():
  a = np.array([[1.5, -2.0]], np.float32)
  b = np.array([[2, 4], [-6, 8]], np.int8)
  (out,) = _run("""
  func.func @main(%a: tensor<1x2xf32>, %b: tensor<2x2xi8>) -> tensor<1x2xf32> {
    %qb = stablehlo.bitcast_convert %b : (tensor<2x2xi8>) -> tensor<2x2x!quant.uniform<i8:f32, 0.5>>
    %r = stablehlo.dot_general %a, %qb, contracting_dims = [1] x [0]
        : (tensor<1x2xf32>, tensor<2x2x!quant.uniform<i8:f32, 0.5>>) -> tensor<1x2xf32>
    return %r : tensor<1x2xf32>
  }""", a, b)
  assert out.tolist() == (a @ (b.astype(np.float32) * 0.5)).tolist()


def _naive_conv2d_nhwc(x, k, pad):
  """x (N, H, W, C), k (KH, KW, C, O), zero padding [(lo, hi)] * 2."""
  x = np.pad(x, [(0, 0), pad[0], pad[1], (0, 0)])
  kh, kw = k.shape[:2]
  oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
  out = np.zeros((x.shape[0], oh, ow, k.shape[3]), np.int64)
  for i in range(oh):
    for j in range(ow):
      out[:, i, j, :] = np.einsum("nhwc,hwco->no", x[:, i:i + kh, j:j + kw, :],
                                  k)
  return out


def test_static_convolution_pads_with_the_lhs_zero_point():
  rng = np.random.default_rng(3)
  x = rng.integers(-20, 20, (1, 3, 4, 2)).astype(np.int8)
  k = rng.integers(-5, 5, (2, 2, 2, 3)).astype(np.int8)
  lq = "!quant.uniform<i8:f32, 0.5:4>"
  rq = "!quant.uniform<i8:f32, 0.5>"
  oq = "!quant.uniform<i32:f32, 0.25:7>"
  (out,) = _run(f"""
  func.func @main(%a: tensor<1x3x4x2xi8>, %b: tensor<2x2x2x3xi8>) -> tensor<1x4x5x3xi32> {{
    %qa = stablehlo.bitcast_convert %a : (tensor<1x3x4x2xi8>) -> tensor<1x3x4x2x{lq}>
    %qb = stablehlo.bitcast_convert %b : (tensor<2x2x2x3xi8>) -> tensor<2x2x2x3x{rq}>
    %r = stablehlo.convolution(%qa, %qb) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
        window = {{pad = [[1, 1], [1, 1]]}}
        {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}
        : (tensor<1x3x4x2x{lq}>, tensor<2x2x2x3x{rq}>) -> tensor<1x4x5x3x{oq}>
    %s = stablehlo.bitcast_convert %r : (tensor<1x4x5x3x{oq}>) -> tensor<1x4x5x3xi32>
    return %s : tensor<1x4x5x3xi32>
  }}""", x, k)
  want = _naive_conv2d_nhwc(x.astype(np.int64) - 4, k.astype(np.int64),
                            [(1, 1), (1, 1)]) + 7
  assert out.tolist() == want.tolist()


def test_other_convolutions_dequantize_compute_and_quantize():
  # A 1-D convolution (no integer lowering upstream) with unit scales: the
  # float result is an integer, quantized exactly.
  x = np.array([[[1, 2, 3, 4]]], np.int8)
  k = np.array([[[1, -1]]], np.int8)
  q = "!quant.uniform<i8:f32, 1.0:1>"
  (out,) = _run(f"""
  func.func @main(%a: tensor<1x1x4xi8>, %b: tensor<1x1x2xi8>) -> tensor<1x1x3xi8> {{
    %qa = stablehlo.bitcast_convert %a : (tensor<1x1x4xi8>) -> tensor<1x1x4x{q}>
    %qb = stablehlo.bitcast_convert %b : (tensor<1x1x2xi8>) -> tensor<1x1x2x{q}>
    %r = stablehlo.convolution(%qa, %qb) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0],
        window = {{}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}
        : (tensor<1x1x4x{q}>, tensor<1x1x2x{q}>) -> tensor<1x1x3x{q}>
    %s = stablehlo.bitcast_convert %r : (tensor<1x1x3x{q}>) -> tensor<1x1x3xi8>
    return %s : tensor<1x1x3xi8>
  }}""", x, k)
  # dequantized x - 1 = [0, 1, 2, 3], k - 1 = [0, -2]: [-2, -4, -6] + zp 1.
  assert out.tolist() == [[[-1, -3, -5]]]


def test_elementwise_ops_dequantize_compute_quantize():
  _needs("stablehlo.abs", "stablehlo.multiply")
  x = np.array([-6, 3, 0], np.int8)
  absq, mul = _run(f"""
  func.func @main(%s: tensor<3xi8>) -> (tensor<3xi8>, tensor<3xi8>) {{
    %q = stablehlo.bitcast_convert %s : (tensor<3xi8>) -> tensor<3x{Q}>
    %a = stablehlo.abs %q : (tensor<3x{Q}>) -> tensor<3x{Q}>
    %m = stablehlo.multiply %q, %q : (tensor<3x{Q}>, tensor<3x{Q}>) -> tensor<3x{Q}>
    %ra = stablehlo.bitcast_convert %a : (tensor<3x{Q}>) -> tensor<3xi8>
    %rm = stablehlo.bitcast_convert %m : (tensor<3x{Q}>) -> tensor<3xi8>
    return %ra, %rm : tensor<3xi8>, tensor<3xi8>
  }}""", x)
  assert absq.tolist() == [6, 3, 0]
  # values [-3, 1.5, 0]; squares [9, 2.25, 0] / 0.5 = [18, 4.5 -> 4, 0].
  assert mul.tolist() == [18, 4, 0]


def test_data_movement_runs_on_storage():
  _needs("stablehlo.transpose", "stablehlo.maximum")
  x = np.array([[1, -2], [3, 4]], np.int8)
  qa = "!quant.uniform<i8:f32:0, {0.5, 0.25}>"
  qt = "!quant.uniform<i8:f32:1, {0.5, 0.25}>"
  tr, mx = _run(f"""
  func.func @main(%s: tensor<2x2xi8>) -> (tensor<2x2xi8>, tensor<2x2xi8>) {{
    %q = stablehlo.bitcast_convert %s : (tensor<2x2xi8>) -> tensor<2x2x{qa}>
    %t = stablehlo.transpose %q, dims = [1, 0] : (tensor<2x2x{qa}>) -> tensor<2x2x{qt}>
    %p = stablehlo.bitcast_convert %s : (tensor<2x2xi8>) -> tensor<2x2x{Q}>
    %m = stablehlo.maximum %p, %p : tensor<2x2x{Q}>
    %rt = stablehlo.bitcast_convert %t : (tensor<2x2x{qt}>) -> tensor<2x2xi8>
    %rm = stablehlo.bitcast_convert %m : (tensor<2x2x{Q}>) -> tensor<2x2xi8>
    return %rt, %rm : tensor<2x2xi8>, tensor<2x2xi8>
  }}""", x)
  assert tr.tolist() == x.T.tolist()
  assert mx.tolist() == x.tolist()


def test_strategy_selection():
  m = text.parse_module(f"""
  func.func @main(%a: tensor<2x{Q}>, %b: tensor<2x{Q_ZP}>) -> tensor<2x{Q}> {{
    %0 = stablehlo.maximum %a, %a : tensor<2x{Q}>
    %1 = stablehlo.maximum %a, %b : (tensor<2x{Q}>, tensor<2x{Q_ZP}>) -> tensor<2x{Q}>
    %2 = stablehlo.reshape %a : (tensor<2x{Q}>) -> tensor<2x{Q}>
    return %1 : tensor<2x{Q}>
  }}""", "s.mlir")
  ops = m.lookup("main").regions[0].blocks[0].operations
  k = lambda *a: None
  assert kq.quantized_kernel(ops[0], k) is k  # same types: storage max
  assert kq.quantized_kernel(ops[1], k) is not k  # dequantize -> max
  assert kq.quantized_kernel(ops[2], k) is k  # data movement


def test_op_view_carries_expressed_types():
  m = text.parse_module(f"""
  func.func @main(%a: tensor<2x{Q}>) -> tensor<2x{Q}> {{
    %0 = stablehlo.abs %a : tensor<2x{Q}>
    return %0 : tensor<2x{Q}>
  }}""", "v.mlir")
  op = m.lookup("main").regions[0].blocks[0].operations[0]
  view = kq.OpView(op, [kq.expressed_type(v.type) for v in op.operands],
                   [kq.expressed_type(v.type) for v in op.results])
  assert view.results[0].type.element_type == t.f32
  assert view.name == "stablehlo.abs" and view.operands[0].owner is view
  assert op.results[0].type.element_type.storage_type.width == 8


_TESTDATA_SAMPLE = (
    "add_qi8.mlir",
    "convolution_qi8.mlir",
    "dot_general_batch_dimensions",
    "conv_general_dilated_conv1d",
    "conv_general_dilated_tf_conversion_path_2d",
)


def test_interpret_corpus():
  assert corpus_testing.run_corpus_file("interpret", "quantized_ops.mlir") >= 1


@pytest.mark.parametrize("prefix", _TESTDATA_SAMPLE)
def test_testdata_sample(prefix):
  root = env.stablehlo_corpus("testdata")
  if root is None:
    pytest.skip(env.missing_corpus_reason("testdata"))
  # The generated file names end in a hash: the first file of the prefix.
  paths = sorted((root / "quantized").glob(prefix + "*"))
  if not paths:
    pytest.skip(f"{prefix} not in the corpus")
  assert corpus_testing.run_corpus_file(
      "testdata", f"quantized/{paths[0].name}") >= 1
