"""Large F16 / BF16 convolutions and F16 dots are computed in f32 between
converts; results match the evaluator, and what the rule leaves out keeps
its 16-bit kernel."""

import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import blas
from xla.service.cpu import cpu_compiler
from xla.service.cpu import cpu_testing as ct
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType

pytestmark = pytest.mark.skipif(blas.library() is None,
                                reason="the rewrite is for BLAS")

# 4 x 16 x 16 x 32 outputs x 16 x 9 = 4.7M multiply-adds.
_CONV = ((4, 16, 16, 16), (3, 3, 16, 32), (4, 16, 16, 32))


def _conv_text(ty, out_ty=None, shapes=_CONV, groups=1):
  out_ty = out_ty or ty
  (ls, rs, os_) = shapes
  j = lambda s: ",".join(map(str, s))
  return f"""
HloModule m
ENTRY e {{
  a = {ty}[{j(ls)}] parameter(0)
  b = {ty}[{j(rs)}] parameter(1)
  ROOT c = {out_ty}[{j(os_)}] convolution(a, b), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, feature_group_count={groups}
}}"""


def _dot_text(ty, m, k, n):
  return f"""
HloModule m
ENTRY e {{
  x = {ty}[{m},{k}] parameter(0)
  w = {ty}[{k},{n}] parameter(1)
  ROOT d = {ty}[{m},{n}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""


def _optimized(text, **options):
  module = ct.parse(text)
  cpu_compiler.run_hlo_passes(module,
                              cpu_compiler.CpuCompileOptions(**options))
  return module.entry_computation


def _ops(comp, opcode):
  """The instructions of `opcode` in `comp` and its fusions."""
  found = []
  for i in comp.instructions:
    if i.opcode == opcode:
      found.append(i)
    for c in i.called_computations():
      found.extend(_ops(c, opcode))
  return found


# 16-bit results: the evaluator may round its sums differently in the last
# place of the 16-bit type.
_TOL = {"f16": dict(rtol=2e-3, atol=2e-2), "bf16": dict(rtol=1.6e-2,
                                                      atol=1.6e-1)}


@pytest.mark.parametrize("ty", ["f16", "bf16"])
def test_convolution_runs_in_f32(ty):
  text = _conv_text(ty)
  (conv,) = _ops(_optimized(text), O.kConvolution)
  assert conv.shape.element_type == P.F32
  assert all(o.shape.element_type == P.F32 for o in conv.operands)
  ct.run_and_compare(text, **_TOL[ty])


def test_widening_convolution_needs_no_final_convert():
  text = _conv_text("bf16", out_ty="f32")
  comp = _optimized(text)
  (conv,) = _ops(comp, O.kConvolution)
  assert conv.shape.element_type == P.F32
  assert comp.root_instruction.shape.element_type == P.F32
  ct.run_and_compare(text, rtol=1e-4, atol=1e-3)


def test_f16_dot_runs_in_f32():
  text = _dot_text("f16", 128, 256, 512)  # 2^24 multiply-adds
  (dot,) = _ops(_optimized(text), O.kDot)
  assert dot.shape.element_type == P.F32
  ct.run_and_compare(text, **_TOL["f16"])


@pytest.mark.parametrize("text", [
    _dot_text("bf16", 128, 256, 512),     # BF16 dots keep their loop kernel
    _dot_text("f16", 64, 128, 512),       # too small to pay for converts
    _conv_text("f16", shapes=((1, 8, 8, 16), (3, 3, 16, 32),
                              (1, 8, 8, 32))),  # too small
    _conv_text("bf16", shapes=((4, 16, 16, 32), (3, 3, 1, 32),
                               (4, 16, 16, 32)), groups=32),  # depthwise
    _conv_text("f32"),
])
def test_left_alone(text):
  comp = _optimized(text)
  ops = _ops(comp, O.kDot) + _ops(comp, O.kConvolution)
  assert len(ops) == 1
  root = ct.parse(text).entry_computation.root_instruction
  assert ops[0].operand(0).shape.element_type == (
      root.operand(0).shape.element_type)


def test_pass_can_be_disabled():
  comp = _optimized(_conv_text("f16"),
                    disable_passes=("cpu-low-precision-upcast",))
  (conv,) = _ops(comp, O.kConvolution)
  assert conv.shape.element_type == P.F16


def test_filecheck():
  from xla.hlo.transforms.simplifiers import pass_test_util  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import low_precision_upcast  # pylint: disable=g-import-not-at-top
  pass_test_util.run_and_filecheck(
      _conv_text("bf16"), low_precision_upcast.LowPrecisionUpcast(), """
CHECK-DAG: [[A:[a-z0-9.]+]] = f32[4,16,16,16]{{.*}} convert(a)
CHECK-DAG: [[B:[a-z0-9.]+]] = f32[3,3,16,32]{{.*}} convert(b)
CHECK: [[C:[a-z0-9.]+]] = f32[4,16,16,32]{{.*}} convolution([[A]], [[B]]), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
CHECK: ROOT {{.*}} = bf16[4,16,16,32]{{.*}} convert([[C]])
""", check_results=True)
  pass_test_util.run_and_filecheck(
      _dot_text("bf16", 128, 256, 512),
      low_precision_upcast.LowPrecisionUpcast(), None)
