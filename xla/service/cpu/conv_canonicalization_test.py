"""ConvCanonicalization: convolutions the CPU emitter could only run as
loops get a canonical order (and BLAS) and still match the evaluator."""

import pytest

from xla.service.cpu import blas
from xla.service.cpu import conv_emitter
from xla.service.cpu import cpu_testing as ct

pytestmark = pytest.mark.skipif(blas.library() is None, reason="no BLAS")


def _text(lhs, rhs, out, attrs, ty="f32"):
  return (f"HloModule m\nENTRY e {{\n  x = {ty}[{lhs}] parameter(0)\n"
          f"  k = {ty}[{rhs}] parameter(1)\n"
          f"  ROOT c = {ty}[{out}] convolution(x, k), {attrs}\n}}")


def _kinds(exe):
  return [conv_emitter.describe(i) for c in exe.module.computations
          for i in c.instructions if i.opcode.value == "convolution"]


@pytest.mark.parametrize("lhs,rhs,out,attrs", [
    # JAX's kernel gradients of NCHW 3x3 "same" convolutions.
    ("32,8,8,8", "32,16,8,8", "16,8,3,3",
     "window={size=8x8 pad=1_1x1_1}, dim_labels=fb01_io01->fb01"),
    ("32,1,16,16", "32,8,16,16", "8,1,3,3",
     "window={size=16x16 pad=1_1x1_1}, dim_labels=fb01_io01->fb01"),
    # Strided, 1-d, and a feature-major output.
    ("4,6,9,9", "4,5,4,4", "5,6,3,3",
     "window={size=4x4 stride=2x2}, dim_labels=fb01_io01->fb01"),
    ("6,3,20", "6,4,18", "4,3,3", "window={size=18}, dim_labels=fb0_io0->fb0"),
])
def test_weight_gradients_use_blas_and_match(lhs, rhs, out, attrs):
  for ty in ("f32", "f64"):
    text = _text(lhs, rhs, out, attrs, ty)
    assert conv_emitter.describe(
        ct.parse(text).entry_computation.root_instruction) == "loops"
    exe, _ = ct.run_and_compare(text, rtol=1e-4 if ty == "f32" else 1e-10,
                                atol=1e-4 if ty == "f32" else 1e-10)
    kinds = _kinds(exe)
    if ty == "f32":
      assert kinds and "loops" not in kinds, kinds
    elif kinds == ["loops"]:  # f64 patches too large for im2col's tiles:
      transposes = [i for c in exe.module.computations
                    for i in c.instructions if i.opcode.value == "transpose"]
      assert not transposes  # ... then the order is left as it was


def test_canonical_grouped_and_integer_convolutions_are_left_alone():
  cases = [
      _text("2,8,8,3", "3,3,3,4", "2,8,8,4",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
      _text("2,8,8,4", "3,3,2,4", "2,8,8,4",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, "
            "feature_group_count=2"),
      _text("4,2,6", "4,3,5", "3,2,2", "window={size=5}, "
            "dim_labels=fb0_io0->fb0", ty="s32"),
  ]
  for text in cases:
    exe, _ = ct.run_and_compare(text, rtol=1e-5, atol=1e-5)
    transposes = [i for c in exe.module.computations for i in c.instructions
                  if i.opcode.value == "transpose"]
    assert not transposes, text
