"""dot_general's `algorithm` in the StableHLO -> HLO import: the ones that
ask for what our dots compute anyway are accepted, others refused by name."""

import numpy as np
import pytest

import support
from xla.tools import hlo_module_reader
from xla.service.cpu import cpu_compiler

_PROGRAM = """
func.func @main(%a: tensor<2x3x{t}>, %b: tensor<3x4x{t}>) -> tensor<2x4x{t}> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT], algorithm = <lhs_precision_type = {lhs}, rhs_precision_type = {t}, accumulation_type = {acc}, lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = {n}, allow_imprecise_accumulation = false> : (tensor<2x3x{t}>, tensor<3x4x{t}>) -> tensor<2x4x{t}>
  return %0 : tensor<2x4x{t}>
}}
"""


def _module(t, acc, lhs=None, n=1):
  text = _PROGRAM.format(t=t, acc=acc, lhs=lhs or t, n=n)
  return hlo_module_reader.read_module("p.mlir", text)


@pytest.mark.parametrize("t,acc", [("bf16", "f32"), ("f16", "f32"),
                                   ("f32", "f32"), ("f64", "f64")])
def test_default_equivalent_algorithms_compile_and_run(t, acc):
  exe = cpu_compiler.compile(_module(t, acc))
  dt = {"bf16": "float32", "f16": "float16", "f32": "float32",
        "f64": "float64"}[t]
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  b = np.ones((3, 4), np.float32)
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  cast = ml_dtypes.bfloat16 if t == "bf16" else dt
  got = exe.execute([a.astype(cast), b.astype(cast)])[0]
  np.testing.assert_array_equal(np.asarray(got, np.float64), a @ b)


def test_an_f32_operand_is_rounded_to_its_bf16_precision():
  # BF16_BF16_F32 on f32 operands (JAX's attention gradient): the lhs is
  # rounded to bf16 first; the rhs here is exact in bf16 anyway.
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  exe = cpu_compiler.compile(_module("f32", "f32", lhs="bf16"))
  a = np.array([[1.0 + 2 ** -12, 3.0, 0.5], [2.0, 1.0 / 3.0, -7.0]],
               np.float32)
  b = np.ones((3, 4), np.float32)
  got = exe.execute([a, b])[0]
  rounded = a.astype(ml_dtypes.bfloat16).astype(np.float32)
  np.testing.assert_array_equal(got, rounded @ b)
  assert not np.array_equal(got, a @ b)


@pytest.mark.parametrize("t,acc,lhs,n", [
    ("bf16", "bf16", None, 1),   # accumulates in bf16
    ("bf16", "f32", "f32", 1),   # a precision wider than the operand
    ("f32", "f32", None, 3),     # several products (bf16x3-style)
])
def test_other_algorithms_are_refused_by_name(t, acc, lhs, n):
  with pytest.raises(support.UnimplementedError,
                     match=r"dot algorithm <lhs_precision_type = "):
    _module(t, acc, lhs, n)
