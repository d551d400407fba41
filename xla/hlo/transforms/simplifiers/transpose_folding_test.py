"""Tests for TransposeFolding; every rewritten module is evaluated against
the original on random inputs."""

import numpy as np

from xla.hlo.transforms.simplifiers import transpose_folding as tf
from xla.hlo.transforms.simplifiers.pass_test_util import entry_module
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _check(body, expected):
  """Runs the pass on ENTRY { body }, FileChecks the result (None: nothing
  may change) and evaluates both modules on the same random inputs."""
  return run_and_filecheck(entry_module(body), tf.TransposeFolding(),
                           expected, check_results=True)


def test_lhs_transpose_folds_into_contracting_dims():
  _check("""a = f32[3,2] parameter(0)
  b = f32[3,4] parameter(1)
  t = f32[2,3] transpose(a), dimensions={1,0}
  ROOT d = f32[2,4] dot(t, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
         """CHECK: ROOT {{.*}} = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
            CHECK-NOT: transpose""")
  # Meaning check: dot(a^T, b) == contraction of a's dim 0 with b's dim 0.
  a = np.arange(6.).reshape(3, 2)
  b = np.arange(12.).reshape(3, 4)
  np.testing.assert_allclose(np.einsum("kn,km->nm", a, b), a.T @ b)


def test_rhs_transpose_and_batch_dims():
  _check("""a = f32[5,2,3] parameter(0)
  b = f32[4,3,5] parameter(1)
  t = f32[5,3,4] transpose(b), dimensions={2,1,0}
  ROOT d = f32[5,2,4] dot(a, t), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}""",
         """CHECK: ROOT {{.*}} = f32[5,2,4]{2,1,0} dot(a, b)
            CHECK-SAME: rhs_batch_dims={2}, rhs_contracting_dims={1}
            CHECK-NOT: transpose""")


def test_reordering_free_dims_is_not_folded():
  # The transpose swaps the two free dims of the lhs: folding would change
  # the order of the result's dimensions.
  _check("""a = f32[3,2,6] parameter(0)
  b = f32[6,4] parameter(1)
  t = f32[2,3,6] transpose(a), dimensions={1,0,2}
  ROOT d = f32[2,3,4] dot(t, b), lhs_contracting_dims={2}, rhs_contracting_dims={0}""",
         None)


def test_dot_without_transpose_is_untouched():
  _check("""a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
         None)


def test_transpose_of_broadcast_becomes_broadcast():
  _check("""a = f32[3] parameter(0)
  b = f32[3,4] broadcast(a), dimensions={0}
  ROOT t = f32[4,3] transpose(b), dimensions={1,0}""",
         """CHECK: ROOT {{.*}} = f32[4,3]{1,0} broadcast(a), dimensions={1}
            CHECK-NOT: transpose""")
  # numpy meaning: transpose(broadcast(a along rows)) puts a along columns.
  a = np.arange(3.)
  np.testing.assert_array_equal(
      np.broadcast_to(a[:, None], (3, 4)).T, np.broadcast_to(a, (4, 3)))


def test_transpose_of_broadcast_needing_operand_transpose_is_kept():
  _check("""a = f32[2,3] parameter(0)
  b = f32[2,3,4] broadcast(a), dimensions={0,1}
  ROOT t = f32[3,2,4] transpose(b), dimensions={1,0,2}""", None)
