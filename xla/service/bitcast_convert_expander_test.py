"""Width-changing bitcast-convert on the CPU backend (expanded by
bitcast_convert_expander) against the HLO evaluator and numpy's view."""

import numpy as np
import pytest

from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck
from xla.service import bitcast_convert_expander as bce
from xla.service.cpu import cpu_testing as ct

_CASES = [
    # (operand shape, result shape)
    ("u32[3,2]", "u64[3]"),
    ("u64[3]", "u32[3,2]"),
    ("s32[2,3,2]", "f64[2,3]"),
    ("f64[4]", "s32[4,2]"),
    ("u8[5,4]", "f32[5]"),
    ("f32[5]", "u8[5,4]"),
    ("bf16[3,2]", "u32[3]"),
    ("u32[3]", "f16[3,2]"),
    ("s16[2,4]", "s64[2]"),
    ("s64[2]", "u16[2,4]"),
]


def _module(src: str, dst: str) -> str:
  return f"""HloModule m
ENTRY e {{
  p = {src} parameter(0)
  ROOT r = {dst} bitcast-convert(p)
}}"""


@pytest.mark.parametrize("src,dst", _CASES)
def test_matches_the_evaluator_and_memory_order(src, dst):
  text = _module(src, dst)
  exe, (got,) = ct.run_and_compare(text, rtol=0, atol=0)
  del exe
  # The bytes are those of the operand: numpy's view of the same memory.
  module = ct.parse(text)
  (arg,) = ct.random_args(module, seed=1)
  got = ct.compile_text(text)[1].execute([arg])[0]
  want = np.ascontiguousarray(arg).view(got.dtype).reshape(got.shape)
  np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_expanded_before_codegen():
  # u64 = lo | hi << 32 from the two u32 halves; no bitcast-convert is left.
  run_and_filecheck(_module("u32[3,2]", "u64[3]"),
                    bce.BitcastConvertExpander(), """
  CHECK-NOT:  bitcast-convert
  CHECK:      [[HI:[a-z.0-9-]+]] = u64[3]{{.*}} shift-left(
  CHECK-NOT:  bitcast-convert
  CHECK:      ROOT {{[a-z.0-9-]+}} = u64[3]{{.*}} or({{[a-z.0-9-]+}}, [[HI]])
  CHECK-NOT:  bitcast-convert
  """, check_results=True)


def test_same_width_and_unhandled_types_are_left_alone():
  run_and_filecheck(_module("u32[3]", "f32[3]"), bce.BitcastConvertExpander(),
                    None)
