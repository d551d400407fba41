"""Tests of cpu_executable.py's execute paths: the precomputed execute plan
of the common call and the general path must give the same results."""

import numpy as np

from xla.service.cpu import cpu_testing as ct

_ADD = """
HloModule add
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  s = f32[4] add(x, y)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(s, x, s)
}
"""


def _args():
  return [np.arange(4, dtype=np.float32),
          np.array([10, 20, 30, 40], np.float32)]


def _check(results, x, y):
  s, x_out, s2 = results
  np.testing.assert_array_equal(s, x + y)
  np.testing.assert_array_equal(x_out, x)
  np.testing.assert_array_equal(s2, x + y)
  assert x_out is not x  # A parameter returned as a result is copied.


def test_common_call_uses_the_plan_and_is_right():
  _, exe = ct.compile_text(_ADD)
  assert exe._fast is not None  # pylint: disable=protected-access
  x, y = _args()
  first = exe.execute([x, y])
  _check(first, x, y)
  second = exe.execute([x, y])  # A reused table and fresh outputs.
  _check(second, x, y)
  assert first[0] is not second[0]
  first[0][:] = 0
  np.testing.assert_array_equal(second[0], x + y)


def test_general_path_agrees():
  _, exe = ct.compile_text(_ADD)
  x, y = _args()
  # float64 and non-contiguous arguments take the general path.
  _check(exe.execute([x.astype(np.float64), y]), x, y)
  wide = np.zeros(8, np.float32)
  wide[::2] = y
  _check(exe.execute([x, wide[::2]]), x, y)


def test_read_only_arguments():
  _, exe = ct.compile_text(_ADD)
  x, y = _args()
  x.flags.writeable = False
  _check(exe.execute([x, y]), x, y)
