"""The B operand of short x W^T gemms is transposed once for BLAS; the
results match the evaluator, and dots outside the rule are left alone."""

import numpy as np
import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import cpu_compiler
from xla.service.cpu import cpu_testing as ct

O = HloOpcode


def _text(ty, m, k, n, lhs_contracting=1, rhs_param=True):
  lhs = f"{ty}[{m},{k}]" if lhs_contracting == 1 else f"{ty}[{k},{m}]"
  if rhs_param:
    rhs_def = f"w = {ty}[{n},{k}] parameter(1)"
  else:
    rhs_def = (f"p = {ty}[{n},{k}] parameter(1)\n"
               f"  w = {ty}[{n},{k}] exponential(p)")
  return f"""
HloModule m
ENTRY e {{
  x = {lhs} parameter(0)
  {rhs_def}
  ROOT d = {ty}[{m},{n}] dot(x, w), lhs_contracting_dims={{{lhs_contracting}}}, rhs_contracting_dims={{1}}
}}"""


def _optimized(text):
  module = ct.parse(text)
  cpu_compiler.run_hlo_passes(module)
  return module.entry_computation


def _dots(comp):
  return [i for i in comp.instructions if i.opcode == O.kDot]


@pytest.mark.parametrize("ty,m,k,n,lc", [
    ("f32", 64, 128, 512, 1),
    ("f32", 8, 64, 64, 1),
    ("f64", 100, 72, 96, 1),
    ("f32", 64, 128, 128, 0),   # A transposed too
])
def test_rewritten_and_matching(ty, m, k, n, lc):
  text = _text(ty, m, k, n, lc)
  dots = _dots(_optimized(text))
  assert len(dots) == 1
  assert list(dots[0].dot_dimension_numbers.rhs_contracting_dimensions) == [0]
  assert dots[0].operand(1).opcode == O.kTranspose
  ct.run_and_compare(text, rtol=1e-5 if ty == "f32" else 1e-12, atol=1e-4)


@pytest.mark.parametrize("text", [
    _text("f32", 256, 128, 512),            # many rows: BLAS is fine
    _text("f32", 64, 32, 512),              # short K
    _text("f32", 64, 128, 512, rhs_param=False),  # B computed here
    _text("bf16", 64, 128, 512),            # not a BLAS type
])
def test_left_alone(text):
  dots = _dots(_optimized(text))
  assert len(dots) == 1
  assert list(dots[0].dot_dimension_numbers.rhs_contracting_dimensions) == [1]


def test_pass_can_be_disabled():
  module = ct.parse(_text("f32", 64, 128, 512))
  cpu_compiler.run_hlo_passes(module, cpu_compiler.CpuCompileOptions(
      disable_passes=("cpu-blas-rhs-transpose",)))
  (dot,) = _dots(module.entry_computation)
  assert list(dot.dot_dimension_numbers.rhs_contracting_dimensions) == [1]


def test_weight_read_by_two_dots():
  text = """
HloModule m
ENTRY e {
  x = f32[32,128] parameter(0)
  y = f32[16,128] parameter(1)
  w = f32[256,128] parameter(2)
  a = f32[32,256] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  b = f32[16,256] dot(y, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT t = (f32[32,256], f32[16,256]) tuple(a, b)
}"""
  comp = _optimized(text)
  assert all(d.operand(1).opcode == O.kTranspose for d in _dots(comp))
  rng = np.random.default_rng(3)
  args = [rng.standard_normal(s).astype(np.float32)
          for s in ((32, 128), (16, 128), (256, 128))]
  ct.run_and_compare(text, args, rtol=1e-5, atol=1e-4)


def test_filecheck():
  from xla.hlo.transforms.simplifiers import pass_test_util  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import blas_rhs_transpose  # pylint: disable=g-import-not-at-top
  pass_test_util.run_and_filecheck(
      _text("f32", 64, 128, 512), blas_rhs_transpose.BlasRhsTranspose(), """
CHECK: w = f32[512,128]{{.*}} parameter(1)
CHECK: [[T:[a-z0-9.]+]] = f32[128,512]{{.*}} transpose(w), dimensions={1,0}
CHECK: dot(x, [[T]]), lhs_contracting_dims={1}, rhs_contracting_dims={0}
""", check_results=True)
  pass_test_util.run_and_filecheck(
      _text("f32", 256, 128, 512), blas_rhs_transpose.BlasRhsTranspose(),
      None)
