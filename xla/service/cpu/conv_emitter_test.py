"""Tests for the convolution kernel emitter: the shifted-gemm (BLAS) kernel
and the generated loop kernel against the HLO evaluator (and numpy / jax),
over dimension numbers, windows, groups and element types."""

import numpy as np
import pytest

from xla import primitive_util
from xla.hlo.parser import hlo_parser
from xla.service import shape_inference
from xla.service.cpu import blas
from xla.service.cpu import contraction_testing as ct
from xla.service.cpu import conv_emitter
from xla.service.cpu import conv_im2col

HAS_BLAS = blas.library() is not None


def _dtype(name):
  return primitive_util.numpy_dtype(primitive_util.from_name(name))


def conv_text(ls, rs, window, labels, fgc=1, bgc=1, ty="f32", rty=None,
              oty=None):
  """HLO text of one convolution; the output shape is inferred."""
  rty = rty or ty
  oty = oty or ty
  j = lambda xs: ",".join(str(x) for x in xs)

  def text(out):
    return f"""HloModule m
ENTRY e {{
  a = {ty}[{j(ls)}] parameter(0)
  b = {rty}[{j(rs)}] parameter(1)
  ROOT c = {out} convolution(a, b), window={{{window}}}, dim_labels={labels}, feature_group_count={fgc}, batch_group_count={bgc}
}}"""

  module = hlo_parser.parse_and_return_unverified_module(text("f32[1]"))
  root = module.entry_computation.root_instruction
  shape = shape_inference.infer_convolution_shape(
      root.operand(0).shape, root.operand(1).shape, root.window,
      root.convolution_dimension_numbers, fgc, bgc)
  dims = ",".join(str(d) for d in shape.dimensions)
  return text(f"{oty}[{dims}]")


def make_kernel(text, mode):
  """The kernel for `mode`: "loops" (no BLAS), "only-im2col" / "only-shifted"
  (that BLAS strategy, else loops), anything else: the default choice."""
  if mode == "loops":
    with blas.disabled():
      return ct.Kernel(text)
  if mode in ("only-im2col", "only-shifted"):
    saved = conv_emitter.STRATEGIES
    conv_emitter.STRATEGIES = (mode[5:],)
    try:
      return ct.Kernel(text)
    finally:
      conv_emitter.STRATEGIES = saved
  return ct.Kernel(text)


MODES = ["auto", "only-im2col", "loops"]


def check(text, *, mode=None, rtol=1e-4, atol=1e-4, seed=0):
  module = hlo_parser.parse_and_return_unverified_module(text)
  root = module.entry_computation.root_instruction
  rng = np.random.default_rng(seed)
  args = [
      ct.random_array(
          rng, tuple(root.operand(i).shape.dimensions),
          primitive_util.numpy_dtype(root.operand(i).shape.element_type))
      for i in range(2)
  ]
  k = make_kernel(text, mode)
  if mode == "loops":
    with blas.disabled():
      assert conv_emitter.describe(k.instr) == "loops"
  elif mode in ("im2col", "shifted") and HAS_BLAS:
    assert conv_emitter.describe(k.instr) == mode
  want = ct.evaluate(text, *args)
  for got in (k(*args), k.run_split(*args)):
    assert got.shape == want.shape
    if got.dtype.kind in "iub":
      np.testing.assert_array_equal(got, want)
    else:
      wide = np.complex128 if got.dtype.kind == "c" else np.float64
      np.testing.assert_allclose(got.astype(wide),
                                 want.astype(got.dtype).astype(wide),
                                 rtol=rtol, atol=atol)
  return k, args, want


# (lhs shape, rhs shape, window, dim_labels, fgc, bgc, strategy with BLAS)
CASES = {
    "nhwc_same": ((2, 7, 7, 16), (3, 3, 16, 32), "size=3x3 pad=1_1x1_1",
                  "b01f_01io->b01f", 1, 1, "shifted"),
    "nhwc_valid_stride2": ((2, 9, 8, 16), (3, 3, 16, 32),
                           "size=3x3 stride=2x2", "b01f_01io->b01f", 1, 1,
                           "shifted"),
    "nhwc_asym_neg_pad": ((2, 9, 9, 16), (3, 2, 16, 24),
                          "size=3x2 pad=2_-1x0_3 stride=1x2",
                          "b01f_01io->b01f", 1, 1, "shifted"),
    "nhwc_rhs_dilate": ((1, 11, 10, 16), (3, 3, 16, 32),
                        "size=3x3 pad=2_2x1_1 rhs_dilate=2x1",
                        "b01f_01io->b01f", 1, 1, "shifted"),
    "nhwc_reversal": ((2, 7, 7, 16), (3, 3, 16, 32),
                      "size=3x3 pad=1_1x1_1 rhs_reversal=1x0",
                      "b01f_01io->b01f", 1, 1, "shifted"),
    # OIHW: neither kernel feature dim has unit stride: no shifted gemm.
    "nchw_same": ((2, 16, 9, 9), (32, 16, 3, 3), "size=3x3 pad=1_1x1_1",
                  "bf01_oi01->bf01", 1, 1, "im2col"),
    "nchw_hwio_same": ((2, 16, 9, 9), (3, 3, 16, 32), "size=3x3 pad=1_1x1_1",
                       "bf01_01io->bf01", 1, 1, "shifted"),
    "nchw_stride2": ((2, 8, 9, 9), (16, 8, 3, 3), "size=3x3 stride=2x2",
                     "bf01_oi01->bf01", 1, 1, "im2col"),
    "odd_labels": ((9, 2, 16, 7), (16, 3, 3, 32), "size=3x3 pad=1_0x0_1",
                   "0bf1_i01o->f01b", 1, 1, "im2col"),
    "lhs_dilate": ((2, 5, 5, 8), (3, 3, 8, 8),
                   "size=3x3 pad=2_2x1_1 lhs_dilate=2x3", "b01f_01io->b01f",
                   1, 1, "im2col"),
    "all_window": ((1, 8, 9, 4), (2, 3, 4, 6),
                   "size=2x3 stride=2x1 pad=1_0x2_1 lhs_dilate=1x2 "
                   "rhs_dilate=2x2 rhs_reversal=0x1", "b01f_01io->b01f", 1, 1,
                   "loops"),
    "conv1d": ((3, 20, 16), (5, 16, 32), "size=5 pad=2_2", "b0f_0io->b0f", 1,
               1, "shifted"),
    "conv3d": ((1, 4, 5, 6, 16), (2, 3, 3, 16, 24),
               "size=2x3x3 pad=0_1x1_1x1_1", "b012f_012io->b012f", 1, 1,
               "shifted"),
    "no_spatial": ((16, 32), (32, 24), "", "bf_io->bf", 1, 1, "shifted"),
    "grouped": ((2, 7, 7, 64), (3, 3, 16, 128), "size=3x3 pad=1_1x1_1",
                "b01f_01io->b01f", 4, 1, "shifted"),
    "depthwise": ((2, 7, 7, 8), (3, 3, 1, 8), "size=3x3 pad=1_1x1_1",
                  "b01f_01io->b01f", 8, 1, "loops"),
    "depthwise_mult2": ((2, 7, 7, 6), (3, 3, 1, 12), "size=3x3 pad=1_1x1_1",
                        "b01f_01io->b01f", 6, 1, "loops"),
    "batch_group": ((4, 7, 7, 16), (3, 3, 16, 64), "size=3x3 pad=1_1x1_1",
                    "b01f_01io->b01f", 1, 2, "shifted"),
    "batch_group_depth": ((6, 5, 5, 4), (3, 3, 4, 3), "size=3x3",
                          "b01f_01io->b01f", 1, 3, "loops"),
    "kernel_bigger_than_input": ((1, 3, 3, 16), (5, 5, 16, 32),
                                 "size=5x5 pad=2_2x2_2", "b01f_01io->b01f", 1,
                                 1, "im2col"),
    # Windows that never reach padding (im2col leaves out bounds tests; in
    # NHWC the window's last dim and the features are copied as one run).
    "patchify": ((2, 16, 16, 3), (4, 4, 3, 32), "size=4x4 stride=4x4",
                 "b01f_01io->b01f", 1, 1, "im2col"),
    "valid_reversal": ((2, 9, 8, 4), (3, 3, 4, 32),
                       "size=3x3 rhs_reversal=0x1", "b01f_01io->b01f", 1, 1,
                       "im2col"),
    "negative_pad_inside": ((2, 9, 9, 4), (3, 3, 4, 32),
                            "size=3x3 pad=-1_0x0_-2 stride=2x1",
                            "b01f_01io->b01f", 1, 1, "im2col"),
    "high_pad_only": ((1, 8, 8, 4), (3, 3, 4, 32), "size=3x3 pad=0_2x0_2",
                      "b01f_01io->b01f", 1, 1, "im2col"),
    "rhs_dilate_valid": ((1, 11, 10, 4), (3, 3, 4, 32),
                         "size=3x3 rhs_dilate=2x2", "b01f_01io->b01f", 1, 1,
                         "im2col"),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", MODES)
def test_conv_f32(name, mode):
  ls, rs, window, labels, fgc, bgc, expect = CASES[name]
  text = conv_text(ls, rs, window, labels, fgc, bgc)
  check(text, mode=expect if mode == "auto" else mode)


@pytest.mark.parametrize("ty", ["f64", "c64", "c128"])
@pytest.mark.parametrize("mode", MODES)
def test_blas_types(ty, mode):
  text = conv_text((2, 7, 7, 16), (3, 3, 16, 32), "size=3x3 pad=1_1x1_1",
                   "b01f_01io->b01f", ty=ty)
  check(text, mode="shifted" if mode == "auto" else mode, rtol=1e-4,
        atol=1e-4)


INT_CASES = [(ty, oty, case)
             for ty, oty in [("s8", "s32"), ("s32", "s32"), ("s8", "s8"),
                             ("u8", "u16"), ("s64", "s64"), ("pred", "pred"),
                             ("s4", "s4")]
             for case in ["nhwc_asym_neg_pad", "depthwise"]] + [
                 ("s8", "s32", "grouped"), ("s8", "s32", "lhs_dilate"),
                 ("s16", "s16", "batch_group"), ("u32", "u32", "all_window")]


@pytest.mark.parametrize("ty,oty,case", INT_CASES)
def test_integer_types(ty, oty, case):
  ls, rs, window, labels, fgc, bgc, _ = CASES[case]
  text = conv_text(ls, rs, window, labels, fgc, bgc, ty=ty, oty=oty)
  check(text)


@pytest.mark.parametrize("ty,oty", [("f16", "f16"), ("bf16", "bf16"),
                                    ("bf16", "f32"), ("f16", "f32")])
@pytest.mark.parametrize("case", ["nhwc_same", "nchw_stride2", "depthwise"])
def test_low_precision(ty, oty, case):
  ls, rs, window, labels, fgc, bgc, _ = CASES[case]
  text = conv_text(ls, rs, window, labels, fgc, bgc, ty=ty, oty=oty)
  # Results rounded once from f32 sums: within an ulp or two of the
  # evaluator (which sums in f32 in another order).
  check(text, rtol=2e-2, atol=3e-2)


def test_f16_accumulates_in_f32():
  # 1x1 conv over 4096 input features of ones: an f16 sum stops at 2048.
  text = conv_text((1, 1, 4096), (1, 4096, 2), "size=1", "b0f_0io->b0f",
                   ty="f16")
  k = ct.Kernel(text)
  got = k(np.ones((1, 1, 4096), np.float16), np.ones((1, 4096, 2), np.float16))
  np.testing.assert_array_equal(got, np.full((1, 1, 2), 4096, np.float16))


@pytest.mark.parametrize("mode", MODES)
def test_empty(mode):
  cases = [
      ((0, 5, 5, 16), (3, 3, 16, 32), "size=3x3", "b01f_01io->b01f"),
      ((2, 2, 5, 16), (3, 3, 16, 32), "size=3x3", "b01f_01io->b01f"),
      ((2, 5, 5, 0), (3, 3, 0, 8), "size=3x3", "b01f_01io->b01f"),  # zeros
      ((2, 5, 5, 4), (3, 3, 4, 0), "size=3x3", "b01f_01io->b01f"),
  ]
  for ls, rs, window, labels in cases:
    text = conv_text(ls, rs, window, labels)
    k = make_kernel(text, mode)
    want = ct.evaluate(text, np.ones(ls, np.float32), np.ones(rs, np.float32))
    got = k(np.ones(ls, np.float32), np.ones(rs, np.float32))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_padding_reads_zeros_not_memory():
  # Every output position sees padding; with NaN-free data the result must
  # equal the evaluator exactly where only padding is read (zero).
  text = conv_text((1, 4, 4, 16), (3, 3, 16, 32), "size=3x3 pad=3_3x3_3",
                   "b01f_01io->b01f")
  for mode in MODES:
    k = make_kernel(text, mode)
    x = np.ones((1, 4, 4, 16), np.float32)
    w = np.ones((3, 3, 16, 32), np.float32)
    got = k(x, w)
    want = ct.evaluate(text, x, w)
    np.testing.assert_array_equal(got, want)
    assert got[0, 0, 0, 0] == 0 and got[0, 4, 4, 0] == 16 * 9


def test_nan_propagates():
  text = conv_text((1, 6, 6, 16), (3, 3, 16, 32), "size=3x3 pad=1_1x1_1",
                   "b01f_01io->b01f")
  x = np.ones((1, 6, 6, 16), np.float32)
  x[0, 2, 3, 5] = np.nan
  w = np.ones((3, 3, 16, 32), np.float32)
  want = ct.evaluate(text, x, w)
  for mode in MODES:
    k = make_kernel(text, mode)
    np.testing.assert_array_equal(np.isnan(k(x, w)), np.isnan(want))


@pytest.mark.skipif(not HAS_BLAS, reason="im2col calls BLAS")
def test_im2col_tests_bounds_only_where_windows_reach_padding():
  def fill(name):
    ls, rs, window, labels, _, _, _ = CASES[name]
    k = make_kernel(conv_text(ls, rs, window, labels), "only-im2col")
    assert conv_emitter.describe(k.instr) == "im2col"
    return k.ir_text
  # Unpadded: no zero fill, no compares but the loops' own; the 4x3
  # (kw, ci) run of each window row is one copy loop.
  patchify = fill("patchify")
  assert "cz." not in patchify and "icmp sge" not in patchify
  assert "c1." not in patchify
  # A window reaching the high padding keeps its test and zero fill.
  assert "cz." in fill("high_pad_only")


def test_every_partition(monkeypatch):
  # Small im2col tiles (7 rows: the last one partial) so it has parts too.
  monkeypatch.setattr(conv_im2col, "PATCH_BYTES", 7 * 144 * 4)
  text = conv_text((2, 5, 6, 16), (3, 3, 16, 32), "size=3x3 pad=1_1x1_1",
                   "b01f_01io->b01f")
  rng = np.random.default_rng(7)
  x = rng.standard_normal((2, 5, 6, 16)).astype(np.float32)
  w = rng.standard_normal((3, 3, 16, 32)).astype(np.float32)
  want = ct.evaluate(text, x, w)
  for mode in MODES:
    k = make_kernel(text, mode)
    e = k.spec.parallel_extent
    assert e > 1
    got = k(x, w, parts=[(i, i + 1) for i in range(e)][::-1])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_matches_jax():
  jax = pytest.importorskip("jax")
  jnp = jax.numpy
  rng = np.random.default_rng(8)
  x = rng.standard_normal((2, 9, 9, 16)).astype(np.float32)
  w = rng.standard_normal((3, 3, 4, 32)).astype(np.float32)
  text = conv_text((2, 9, 9, 16), (3, 3, 4, 32),
                   "size=3x3 stride=2x1 pad=1_1x0_2 rhs_dilate=1x2",
                   "b01f_01io->b01f", fgc=4)
  got = ct.Kernel(text)(x, w)
  want = jax.lax.conv_general_dilated(
      jnp.asarray(x), jnp.asarray(w), (2, 1), ((1, 1), (0, 2)),
      rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC"),
      feature_group_count=4)
  np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-4)
  # lhs dilation (a transposed convolution) through the loop kernel.
  text = conv_text((2, 9, 9, 16), (3, 3, 16, 8),
                   "size=3x3 pad=1_1x1_1 lhs_dilate=2x2", "b01f_01io->b01f")
  w2 = rng.standard_normal((3, 3, 16, 8)).astype(np.float32)
  got = ct.Kernel(text)(x, w2)
  want = jax.lax.conv_general_dilated(
      jnp.asarray(x), jnp.asarray(w2), (1, 1), ((1, 1), (1, 1)),
      lhs_dilation=(2, 2), dimension_numbers=("NHWC", "HWIO", "NHWC"))
  np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-4)


def test_both_group_counts_unimplemented():
  import support  # pylint: disable=g-import-not-at-top
  text = conv_text((4, 5, 5, 4), (3, 3, 2, 4), "size=3x3", "b01f_01io->b01f",
                   fgc=2, bgc=1)
  text = text.replace("batch_group_count=1", "batch_group_count=2")
  with pytest.raises(support.UnimplementedError):
    ct.Kernel(text)
