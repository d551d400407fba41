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


@pytest.mark.parametrize("t,acc,lhs,n", [
    ("bf16", "bf16", None, 1),   # accumulates in bf16
    ("f32", "f32", "bf16", 1),   # rounds f32 operands to bf16
    ("f32", "f32", None, 3),     # several products (bf16x3-style)
])
def test_other_algorithms_are_refused_by_name(t, acc, lhs, n):
  with pytest.raises(support.UnimplementedError,
                     match=r"dot algorithm <lhs_precision_type = "):
    _module(t, acc, lhs, n)
