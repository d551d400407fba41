"""Programs whose arrays have a zero-size dimension compile and run."""

import numpy as np

from xla.service.cpu import cpu_testing

# jnp.broadcast_to(x[:, None, :], (2, 0, 3)).reshape(2, 0) and lax.tile to a
# zero count reach the compiler as these shapes.
_BROADCAST_RESHAPE = """
HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  b = f32[2,0,3]{2,1,0} broadcast(p), dimensions={0,2}
  ROOT r = f32[2,0]{1,0} reshape(b)
}
"""

_TRANSPOSE_ADD = """
HloModule m
ENTRY e {
  p = f32[0,5]{1,0} parameter(0)
  t = f32[5,0]{1,0} transpose(p), dimensions={1,0}
  ROOT a = f32[5,0]{1,0} add(t, t)
}
"""


def test_broadcast_to_zero_size_then_reshape():
  _, outs = cpu_testing.run_and_compare(
      _BROADCAST_RESHAPE, [np.ones((2, 3), np.float32)])
  assert np.asarray(outs[0]).shape == (2, 0)


def test_zero_size_transpose_and_add():
  _, outs = cpu_testing.run_and_compare(
      _TRANSPOSE_ADD, [np.ones((0, 5), np.float32)])
  assert np.asarray(outs[0]).shape == (5, 0)


# jnp.concatenate of the two empty halves of threefry's output (JAX's
# random_test, testThreefry2x32Empty): every piece of the concatenation is
# empty, so its elemental value has no piece to read.
_CONCATENATE_EMPTY = """
HloModule m
ENTRY e {
  a = u32[0]{0} parameter(0)
  b = u32[0]{0} parameter(1)
  c = u32[0]{0} concatenate(a, b), dimensions={0}
  ROOT r = u32[0]{0} add(c, c)
}
"""


def test_concatenate_of_empty_pieces():
  empty = np.zeros((0,), np.uint32)
  _, outs = cpu_testing.run_and_compare(_CONCATENATE_EMPTY, [empty, empty])
  assert np.asarray(outs[0]).shape == (0,)
