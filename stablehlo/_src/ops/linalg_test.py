"""Verifier tests for dot_general, convolution, fft, cholesky,
triangular_solve and the batch_norm ops."""

import pytest

from stablehlo._src.ir import attributes as a
from stablehlo._src.ops import testing as tt
from stablehlo._src.ops import verify
from stablehlo._src.ops.testing import T, dattr, dense, enum, i64, i64s, op
from stablehlo._src.ops.testing import quant


def check(o, cid):
  msg = tt.error_of(o)
  if cid is None:
    assert msg is None, msg
  else:
    assert msg is not None and cid in msg, msg


QL = quant("i8", "f32", (0.5,))
QR = quant("i8", "f32", (0.25,))
QO = quant("i32", "f32", (0.125,))


def dot(lhs="2x3x4xf32", rhs="2x4x5xf32", dst="2x3x5xf32", lb=(0,), rb=(0,),
        lc=(2,), rc=(1,), precision=None, algorithm=None):
  attrs = {"dot_dimension_numbers": dattr(
      "stablehlo.dot", lhs_batching_dimensions=lb, rhs_batching_dimensions=rb,
      lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc)}
  if precision is not None:
    attrs["precision_config"] = a.ArrayAttr(tuple(
        enum("precision", p) for p in precision))
  if algorithm is not None:
    attrs["algorithm"] = dattr("stablehlo.dot_algorithm", **algorithm)
  lt = T(lhs) if isinstance(lhs, str) else lhs
  rt = T(rhs) if isinstance(rhs, str) else rhs
  dt = T(dst) if isinstance(dst, str) else dst
  return op("stablehlo.dot_general", [lt, rt], [dt], **attrs)


@pytest.mark.parametrize("o,cid", [
    (dot(), None),
    (dot(lhs="2x?x4xf32", dst="2x3x5xf32"), None),
    (dot(lhs="2x3x4xf32", rhs="2x4x5xf32", dst="2x3x5xf64"), None),
    (dot(precision=("DEFAULT", "HIGHEST")), None),
    (dot(lb=(0,), rb=()), "dot_general_c1"),
    (dot(lc=(2,), rc=()), "dot_general_c2"),
    (dot(lb=(0,), lc=(0,), rc=(0,), rb=(1,)), "dot_general_c3"),
    (dot(rb=(1,), rc=(1,)), "dot_general_c4"),
    (dot(lb=(5,)), "dot_general_c5"),
    (dot(lc=(5,)), "dot_general_c6"),
    (dot(rb=(5,)), "dot_general_c7"),
    (dot(rc=(5,)), "dot_general_c8"),
    (dot(rhs="3x4x5xf32"), "dot_general_c9"),
    (dot(rhs="2x3x5xf32"), "dot_general_c10"),
    (dot(precision=("DEFAULT",)), "dot_general_c11"),
    (dot(dst="2x5x3xf32"), "dot_general_c12"),
    # Mixed operand types: upstream's verifier does not enforce c13.
    (dot(rhs="2x4x5xf64"), None),
    (dot(lhs="2x3x4xf8E4M3FN", rhs="2x4x5xf8E5M2", dst="2x3x5xf32"), None),
    (dot(lhs="2x3x4xbf16", rhs="2x4x5xf32", dst="2x3x5xf32"), None),
    (dot(lhs=T("3x4", QL), rhs=T("4x5", QR), dst=T("3x5", QO), lb=(), rb=(),
         lc=(1,), rc=(0,)), None),
    (dot(lhs=T("3x4", QL), rhs=T("4x5", QR), dst="3x5xf32", lb=(), rb=(),
         lc=(1,), rc=(0,)), "dot_general_c14"),
    (dot(lhs=T("3x4", QL), rhs=T("4x5", quant("i8", "f32", (0.5,), (1,))),
         dst=T("3x5", QO), lb=(), rb=(), lc=(1,), rc=(0,)),
     "dot_general_c15"),
    (dot(lhs=T("3x4", QL), rhs=T("4x5", quant("i8", "f32", (0.5,) * 4,
                                              axis=0)),
         dst=T("3x5", QO), lb=(), rb=(), lc=(1,), rc=(0,)),
     "dot_general_c16"),
    (dot(lhs=T("3x4", QL), rhs=T("4x5", quant("i16", "f32", (0.5,))),
         dst=T("3x5", QO), lb=(), rb=(), lc=(1,), rc=(0,)),
     "dot_general_c17"),
    (dot(lhs=T("3x4", QL), rhs=T("4x5", quant("i8", "f16", (0.5,))),
         dst=T("3x5", QO), lb=(), rb=(), lc=(1,), rc=(0,)),
     "dot_general_c18"),
    (dot(lhs=T("3x4", QL), rhs=T("4x5", QR),
         dst=T("3x5", quant("i32", "f32", (0.5,) * 5, axis=1)), lb=(),
         rb=(), lc=(1,), rc=(0,)), "dot_general_c19"),
    (dot(lhs="3x4xf32", rhs=T("4x5", QR), dst="3x5xf32", lb=(), rb=(),
         lc=(1,), rc=(0,)), None),
    (dot(lhs="3x4xf16", rhs=T("4x5", QR), dst="3x5xf16", lb=(), rb=(),
         lc=(1,), rc=(0,)), "dot_general_c20"),
    (dot(precision=("HIGH", "HIGH"), algorithm=dict(lhs_component_count=1)),
     "dot_general_c21"),
    (dot(algorithm=dict(lhs_component_count=0)), "dot_general_c22"),
    (dot(algorithm=dict(rhs_component_count=0)), "dot_general_c23"),
    (dot(algorithm=dict(num_primitive_operations=0)), "dot_general_c24"),
])
def test_dot_general(o, cid):
  check(o, cid)


def test_dot_general_infer():
  assert verify.infer_result_types(dot()) == [T("2x3x5xf32")]


def test_deprecated_dot():
  check(op("stablehlo.dot", [T("3x4xf32"), T("4x5xf32")], [T("3x5xf32")]),
        None)
  check(op("stablehlo.dot", [T("3x4xf32"), T("3x5xf32")], [T("3x5xf32")]),
        "dot_schema")


def cdn(ib=0, if_=3, isp=(1, 2), kif=2, kof=3, ksp=(0, 1), ob=0, of_=3,
        osp=(1, 2)):
  return dattr("stablehlo.conv", input_batch_dimension=ib,
               input_feature_dimension=if_, input_spatial_dimensions=isp,
               kernel_input_feature_dimension=kif,
               kernel_output_feature_dimension=kof,
               kernel_spatial_dimensions=ksp, output_batch_dimension=ob,
               output_feature_dimension=of_, output_spatial_dimensions=osp)


def conv(lhs="1x4x4x2xf32", rhs="3x3x2x8xf32", dst="1x2x2x8xf32",
         strides=(1, 1), pad=((0, 0), (0, 0)), lhs_dil=(1, 1),
         rhs_dil=(1, 1), fgc=1, bgc=1, dn=None, reversal=None,
         precision=None):
  attrs = dict(window_strides=i64s(*strides), padding=dense(list(pad)),
               lhs_dilation=i64s(*lhs_dil), rhs_dilation=i64s(*rhs_dil),
               feature_group_count=i64(fgc), batch_group_count=i64(bgc),
               dimension_numbers=dn or cdn())
  if reversal is not None:
    attrs["window_reversal"] = tt.bools(*reversal)
  if precision is not None:
    attrs["precision_config"] = a.ArrayAttr(tuple(
        enum("precision", p) for p in precision))
  lt = T(lhs) if isinstance(lhs, str) else lhs
  rt = T(rhs) if isinstance(rhs, str) else rhs
  dt = T(dst) if isinstance(dst, str) else dst
  return op("stablehlo.convolution", [lt, rt], [dt], **attrs)


@pytest.mark.parametrize("o,cid", [
    (conv(), None),
    (conv(strides=(2, 2), pad=((1, 1), (1, 1)), dst="1x2x2x8xf32"), None),
    (conv(lhs_dil=(2, 2), dst="1x5x5x8xf32"), None),
    (conv(fgc=2, rhs="3x3x1x8xf32"), None),
    (conv(rhs="3x3x2xf32"), "convolution_c1"),
    (conv(strides=(1,)), "convolution_c2"),
    (conv(strides=(0, 1)), "convolution_c3"),
    (conv(pad=((0, 0),)), "convolution_c4"),
    (conv(lhs_dil=(1,)), "convolution_c5"),
    (conv(lhs_dil=(0, 1)), "convolution_c6"),
    (conv(rhs_dil=(1,)), "convolution_c7"),
    (conv(rhs_dil=(1, 0)), "convolution_c8"),
    (conv(reversal=(0,)), "convolution_c9"),
    (conv(lhs="3x4x4x2xf32", rhs="3x3x2x8xf32", bgc=2), "convolution_c10"),
    (conv(lhs="1x4x4x3xf32", fgc=2, rhs="3x3x1x8xf32"), "convolution_c11"),
    (conv(dn=cdn(isp=(1,))), "convolution_c12"),
    (conv(dn=cdn(isp=(1, 1))), "convolution_c13"),
    (conv(rhs="3x3x3x8xf32"), "convolution_c14"),
    (conv(lhs="2x4x4x2xf32", rhs="3x3x2x7xf32", bgc=2), "convolution_c15"),
    (conv(lhs="1x4x4x2xf32", rhs="3x3x1x7xf32", fgc=2), "convolution_c16"),
    (conv(dn=cdn(ksp=(0,))), "convolution_c17"),
    (conv(dn=cdn(ksp=(0, 2))), "convolution_c18"),
    (conv(dn=cdn(osp=(1,))), "convolution_c19"),
    (conv(dn=cdn(osp=(1, 4))), "convolution_c20"),
    (conv(fgc=0), "convolution_c21"),
    (conv(bgc=0), "convolution_c22"),
    (conv(fgc=2, bgc=2, lhs="2x4x4x2xf32", rhs="3x3x1x8xf32"),
     "convolution_c23"),
    (conv(precision=("DEFAULT",)), "convolution_c24"),
    (conv(dst="1x3x3x8xf32"), "convolution_c25"),
    (conv(dst="1x2x2x8x1xf32"), "convolution_c26"),
    (conv(rhs="3x3x2x8xf64"), "convolution_c27"),
    (conv(lhs="1x4x4x2xi8", rhs="3x3x2x8xi8", dst="1x2x2x8xi32"), None),
    (conv(lhs=T("1x4x4x2", QL), rhs=T("3x3x2x8", QR), dst="1x2x2x8xf32"),
     "convolution_c28"),
    (conv(lhs=T("1x4x4x2", QL), rhs=T("3x3x2x8", quant(
        "i8", "f32", (0.5,) * 3, axis=0)), dst=T("1x2x2x8", QO)),
     "convolution_c29"),
    (conv(lhs=T("1x4x4x2", QL), rhs=T("3x3x2x8", quant(
        "i8", "f32", (0.5,) * 8, axis=3)), dst=T("1x2x2x8", quant(
            "i32", "f32", (0.5,) * 2, axis=1))), "convolution_c30"),
    (conv(lhs=T("1x4x4x2", QL), rhs=T("3x3x2x8", quant("i4", "f32")),
          dst=T("1x2x2x8", QO)), "convolution_c31"),
    (conv(lhs=T("1x4x4x2", QL), rhs=T("3x3x2x8", QR),
          dst=T("1x2x2x8", quant("i32", "f16"))), "convolution_c32"),
    (conv(lhs=T("1x4x4x2", QL), rhs=T("3x3x2x8", QR), dst=T("1x2x2x8",
          quant("i32", "f32", (0.5,) * 8, axis=3))), "convolution_c33"),
    (conv(lhs="1x4x4x2xf16", rhs=T("3x3x2x8", QR), dst="1x2x2x8xf16"),
     "convolution_c34"),
])
def test_convolution(o, cid):
  check(o, cid)


def test_dynamic_conv():
  def dconv(pad_type="2x2xi64", dst="1x?x?x8xf32", pad_op=None):
    p = pad_op.result if pad_op is not None else T(pad_type)
    return op("stablehlo.dynamic_conv", [T("1x4x4x2xf32"),
                                         T("3x3x2x8xf32"), p], [T(dst)],
              window_strides=i64s(1, 1), feature_group_count=i64(1),
              batch_group_count=i64(1), dimension_numbers=cdn())
  check(dconv(), None)
  check(dconv("3x2xi64"), "dynamic_conv_c4")
  const = op("stablehlo.constant", [], [T("2x2xi64")],
             value=dense([[1, 1], [1, 1]]))
  check(dconv(dst="1x4x4x8xf32", pad_op=const), None)
  check(dconv(dst="1x2x2x8xf32", pad_op=const), "dynamic_conv_c25")


_MIXES = [("f32", "f64", "f32"), ("f8E4M3FN", "f8E5M2", "f32"),
          ("f8E4M3FN", "f8E5M2", "f8E5M2"), ("bf16", "f32", "f32"),
          ("i8", "f32", "f32"), ("i1", "i32", "i32")]


@pytest.mark.parametrize("lhs,rhs,res", _MIXES)
def test_mixed_dot_general_types_match_jaxlib(lhs, rhs, res):
  """We accept the mixed non-quantized element types jaxlib accepts."""
  jmlir = pytest.importorskip("jax._src.interpreters.mlir")
  ir = pytest.importorskip("jaxlib.mlir.ir")
  from stablehlo._src import text as mlir_text  # pylint: disable=g-import-not-at-top
  text = (
      f"func.func @main(%a: tensor<2x3x{lhs}>, %b: tensor<3x4x{rhs}>) -> "
      f"tensor<2x4x{res}> {{\n"
      f"  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
      f"(tensor<2x3x{lhs}>, tensor<3x4x{rhs}>) -> tensor<2x4x{res}>\n"
      f"  return %0 : tensor<2x4x{res}>\n}}\n")
  with jmlir.make_ir_context():
    theirs = ir.Module.parse(text).operation.verify()
  module = mlir_text.parse_module(text)
  ours = verify.verify_module(module) is None
  assert theirs is True and ours


@pytest.mark.parametrize("src,dst,kind,length,cid", [
    ("4x8xcomplex<f32>", "4x8xcomplex<f32>", "FFT", (8,), None),
    ("4x8xf32", "4x5xcomplex<f32>", "RFFT", (8,), None),
    ("4x5xcomplex<f32>", "4x8xf32", "IRFFT", (8,), None),
    ("8xcomplex<f32>", "8xcomplex<f32>", "FFT", (8, 8), "fft_c1"),
    ("8xcomplex<f32>", "8xcomplex<f64>", "FFT", (8,), "fft_c2"),
    ("4x8xf32", "4x5xcomplex<f64>", "RFFT", (8,), "fft_c2"),
    ("1x1x1x8xcomplex<f32>", "1x1x1x8xcomplex<f32>", "FFT", (1, 1, 1, 8),
     "fft_c3"),
    ("4x8xf32", "4x5xcomplex<f32>", "RFFT", (6,), "fft_c4"),
    ("4x8xf32", "4x8xcomplex<f32>", "RFFT", (8,), "fft_c5"),
    ("4x8xcomplex<f32>", "4x7xcomplex<f32>", "FFT", (8,), "fft_c5"),
])
def test_fft(src, dst, kind, length, cid):
  check(op("stablehlo.fft", [T(src)], [T(dst)],
           fft_type=enum("fft_type", kind), fft_length=i64s(*length)), cid)


def test_cholesky_triangular_solve():
  check(op("stablehlo.cholesky", [T("3x3xf32")], [T("3x3xf32")]), None)
  check(op("stablehlo.cholesky", [T("3x3xf32")], [T("3x3xf64")]),
        "cholesky_c1")
  check(op("stablehlo.cholesky", [T("3xf32")], [T("3xf32")]), "cholesky_c2")
  check(op("stablehlo.cholesky", [T("3x2xf32")], [T("3x2xf32")]),
        "cholesky_c3")

  def ts(a_="3x3xf32", b_="3x4xf32", dst="3x4xf32", left=True):
    return op("stablehlo.triangular_solve", [T(a_), T(b_)], [T(dst)],
              left_side=a.BoolAttr(left), lower=a.BoolAttr(True),
              unit_diagonal=a.BoolAttr(False),
              transpose_a=enum("transpose", "NO_TRANSPOSE"))
  check(ts(), None)
  check(ts(b_="4x3xf32", dst="4x3xf32", left=False), None)
  check(ts(b_="3x4xf64", dst="3x4xf64"), "triangular_solve_c1")
  check(ts(b_="2x3x4xf32", dst="2x3x4xf32"), "triangular_solve_c2")
  check(ts(b_="4x4xf32", dst="4x4xf32"), "triangular_solve_c3")
  check(ts(dst="3x5xf32"), "triangular_solve_c4")


def _bn_inference(x="2x3xf32", sizes=(3, 3, 3, 3), dst="2x3xf32", fi=1,
                  elem="f32"):
  return op("stablehlo.batch_norm_inference",
            [T(x)] + [T(f"{n}x{elem}") for n in sizes], [T(dst)],
            epsilon=a.FloatAttr(1e-5), feature_index=i64(fi))


@pytest.mark.parametrize("o,cid", [
    (_bn_inference(), None),
    (_bn_inference(fi=2), "batch_norm_inference_c1"),
    (_bn_inference(elem="f64"), "batch_norm_inference_c2"),
    (_bn_inference(sizes=(2, 3, 3, 3)), "batch_norm_inference_c3"),
    (_bn_inference(sizes=(3, 2, 3, 3)), "batch_norm_inference_c4"),
    (_bn_inference(sizes=(3, 3, 2, 3)), "batch_norm_inference_c5"),
    (_bn_inference(sizes=(3, 3, 3, 2)), "batch_norm_inference_c6"),
    (_bn_inference(dst="3x2xf32"), "batch_norm_inference_c7"),
])
def test_batch_norm_inference(o, cid):
  check(o, cid)


def test_batch_norm_training_and_grad():
  def tr(x="2x3xf32", s=("3xf32", "3xf32"), outs=("2x3xf32", "3xf32",
                                                   "3xf32"), fi=1):
    return op("stablehlo.batch_norm_training", [T(x)] + [T(y) for y in s],
              [T(y) for y in outs], epsilon=a.FloatAttr(1e-5),
              feature_index=i64(fi))
  check(tr(), None)
  check(tr(fi=-1), "batch_norm_training_c1")
  check(tr(s=("3xf64", "3xf32")), "batch_norm_training_c2")
  check(tr(s=("2xf32", "3xf32")), "batch_norm_training_c3")
  check(tr(s=("3xf32", "2xf32")), "batch_norm_training_c4")
  check(tr(outs=("2x3xf32", "2xf32", "3xf32")), "batch_norm_training_c5")
  check(tr(outs=("2x3xf32", "3xf32", "2xf32")), "batch_norm_training_c6")
  check(tr(outs=("3x2xf32", "3xf32", "3xf32")), "batch_norm_training_c7")

  def gr(x="2x3xf32", s=("3xf32",) * 3, gout="2x3xf32",
         outs=("2x3xf32", "3xf32", "3xf32"), fi=1):
    return op("stablehlo.batch_norm_grad",
              [T(x)] + [T(y) for y in s] + [T(gout)], [T(y) for y in outs],
              epsilon=a.FloatAttr(1e-5), feature_index=i64(fi))
  check(gr(), None)
  check(gr(fi=5), "batch_norm_grad_c1")
  check(gr(gout="2x3xf64"), "batch_norm_grad_c2")
  check(gr(gout="3x3xf32"), "batch_norm_grad_c3")
  check(gr(s=("3xf32", "3xf32", "4xf32")), "batch_norm_grad_c4")
  check(gr(s=("2xf32",) * 3, outs=("2x3xf32", "2xf32", "2xf32")),
        "batch_norm_grad_c5")
