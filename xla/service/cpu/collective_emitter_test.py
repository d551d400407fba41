"""Tests for the single-device collective copy kernels."""

import numpy as np
import pytest

import support
from xla.service.cpu import collective_emitter  # pylint: disable=unused-import
from xla.service.cpu import op_emitter_testing as t

_SUM = """sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _module(root, header="HloModule m", extra=""):
  return f"""{header}
{_SUM}
ENTRY e {{
  x = f32[2,3] parameter(0)
  y = s32[4] parameter(1)
{extra}  ROOT r = {root}
}}"""


_X = np.arange(6, dtype=np.float32).reshape(2, 3)
_Y = np.array([1, -2, 3, -4], np.int32)


@pytest.mark.parametrize("root", [
    "f32[2,3] all-reduce(x), replica_groups={}, to_apply=sum",
    "(f32[2,3], s32[4]) all-reduce(x, y), replica_groups={{0}}, to_apply=sum",
    "f32[2,3] all-gather(x), dimensions={0}, replica_groups={{0}}",
    "f32[2,3] reduce-scatter(x), dimensions={1}, replica_groups={}, "
    "to_apply=sum",
    "f32[2,3] all-to-all(x), dimensions={0}, replica_groups={{0}}",
    "f32[2,3] collective-permute(x), source_target_pairs={{0,0}}",
])
def test_single_participant_is_identity(root):
  args = [_X, _Y] if "(x, y)" in root else [_X]  # the kernel's operands
  got = t.run_instruction(_module(root), args)
  t.assert_same(got, args)


def test_permute_without_self_pair_gives_zeros():
  got = t.run_instruction(
      _module("f32[2,3] collective-permute(x), source_target_pairs={}"),
      [_X])[0]
  np.testing.assert_array_equal(got, np.zeros((2, 3), np.float32))


def test_multi_device_is_unimplemented():
  text = _module("f32[2,3] all-reduce(x), replica_groups={}, to_apply=sum",
                 header="HloModule m, replica_count=2")
  with pytest.raises(support.UnimplementedError):
    t.compile_instruction(text)
  text = _module("f32[4,3] all-gather(x), dimensions={0}, "
                 "replica_groups={}")
  with pytest.raises(support.UnimplementedError):
    t.compile_instruction(text)
