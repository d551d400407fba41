"""Tests for ReshapeMover and the bitcast predicates."""

import pytest

from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import reshape_mover as rm
from xla.hlo.transforms.simplifiers.pass_test_util import entry_module
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _check(body, expected):
  """Runs the pass on ENTRY { body }, FileChecks the result (None: nothing
  may change) and evaluates both modules on the same random inputs."""
  return run_and_filecheck(entry_module(body), rm.ReshapeMover(), expected,
                           check_results=True)


def test_two_reshapes_sink_below_add():
  # Both old reshapes are gone.
  _check("""a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ra = f32[6] reshape(a)
  rb = f32[6] reshape(b)
  ROOT r = f32[6] add(ra, rb)""", """
  CHECK-NOT:  ra =
  CHECK-NOT:  rb =
  CHECK:      [[ADD:[a-z.0-9]+]] = f32[2,3]{{[^ ]*}} add(a, b)
  CHECK-NEXT: ROOT {{.*}} = f32[6]{0} reshape([[ADD]])
  CHECK-NOT:  ra =
  CHECK-NOT:  rb =""")


def test_transposes_sink_below_compare_keep_direction():
  _check("""a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ta = f32[3,2] transpose(a), dimensions={1,0}
  tb = f32[3,2] transpose(b), dimensions={1,0}
  ROOT r = pred[3,2] compare(ta, tb), direction=LT""", """
  CHECK: [[CMP:[a-z.0-9]+]] = pred[2,3]{{[^ ]*}} compare(a, b), direction=LT
  CHECK: ROOT {{.*}} = pred[3,2]{1,0} transpose([[CMP]]), dimensions={1,0}""")


def test_scalar_broadcast_is_rebroadcast():
  _check("""a = f32[2,3] parameter(0)
  s = f32[] parameter(1)
  ra = f32[3,2] reshape(a)
  bs = f32[3,2] broadcast(s), dimensions={}
  ROOT r = f32[3,2] multiply(ra, bs)""", """
  CHECK: [[B:[a-z.0-9]+]] = f32[2,3]{{[^ ]*}} broadcast(s), dimensions={}
  CHECK: [[M:[a-z.0-9]+]] = f32[2,3]{{[^ ]*}} multiply(a, [[B]])
  CHECK: ROOT {{.*}} = f32[3,2]{1,0} reshape([[M]])""")


def test_constant_is_inversely_transposed():
  # transpose(c') must equal c: c' = c^T.
  _check("""a = s32[2,3] parameter(0)
  t = s32[3,2] transpose(a), dimensions={1,0}
  c = s32[3,2] constant({{1,2},{3,4},{5,6}})
  ROOT r = s32[3,2] add(t, c)""", """
  CHECK: [[C:[a-z.0-9]+]] = s32[2,3]{{[^ ]*}} constant({ { 1, 3, 5 }, { 2, 4, 6 } })
  CHECK: [[ADD:[a-z.0-9]+]] = s32[2,3]{{[^ ]*}} add(a, [[C]])
  CHECK: ROOT {{.*}} = s32[3,2]{1,0} transpose([[ADD]]), dimensions={1,0}""")


def test_chain_moves_down():
  _check("""a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ra = f32[6] reshape(a)
  rb = f32[6] reshape(b)
  s = f32[6] add(ra, rb)
  ROOT n = f32[6] negate(s)""", """
  CHECK: [[ADD:[a-z.0-9]+]] = f32[2,3]{{[^ ]*}} add(a, b)
  CHECK: [[NEG:[a-z.0-9]+]] = f32[2,3]{{[^ ]*}} negate([[ADD]])
  CHECK: ROOT {{.*}} = f32[6]{0} reshape([[NEG]])""")


NEGATIVE = [
    ("different_input_shapes", """a = f32[2,3] parameter(0)
  b = f32[3,2] parameter(1)
  ra = f32[6] reshape(a)
  rb = f32[6] reshape(b)
  ROOT r = f32[6] add(ra, rb)"""),
    ("different_permutations", """a = f32[2,2] parameter(0)
  b = f32[2,2] parameter(1)
  ta = f32[2,2] transpose(a), dimensions={1,0}
  tb = f32[2,2] transpose(b), dimensions={0,1}
  ROOT r = f32[2,2] add(ta, tb)"""),
    ("reshape_and_parameter", """a = f32[2,3] parameter(0)
  b = f32[6] parameter(1)
  ra = f32[6] reshape(a)
  ROOT r = f32[6] add(ra, b)"""),
    ("single_reshape_with_other_user", """a = f32[2,3] parameter(0)
  ra = f32[6] reshape(a)
  n = f32[6] negate(ra)
  ROOT t = (f32[6], f32[6]) tuple(n, ra)"""),
    ("not_elementwise", """a = f32[2,3] parameter(0)
  ra = f32[6] reshape(a)
  ROOT r = f32[3] slice(ra), slice={[0:3]}"""),
    ("reshape_of_constant_only", """c = f32[2] constant({1, 2})
  rc = f32[1,2] reshape(c)
  ROOT n = f32[1,2] negate(rc)"""),
]


@pytest.mark.parametrize("name,body", NEGATIVE, ids=[n for n, _ in NEGATIVE])
def test_does_not_fire(name, body):
  _check(body, None)


def _s(text):
  return hp.parse_shape(text)


def test_reshape_is_bitcast_default_layouts():
  assert rm.reshape_is_bitcast(_s("f32[2,3]{1,0}"), _s("f32[6]{0}"))
  assert rm.reshape_is_bitcast(_s("f32[2,3]"), _s("f32[3,2]"))


def test_reshape_is_bitcast_column_major_input():
  # Column-major [2,3] stores a00 a10 a01 ...: flattening is not a bitcast.
  assert not rm.reshape_is_bitcast(_s("f32[2,3]{0,1}"), _s("f32[6]{0}"))
  # Adding a unit dimension anywhere is.
  assert rm.reshape_is_bitcast(_s("f32[2,3]{0,1}"), _s("f32[2,1,3]{0,1,2}"))
  # Same column-major order on both sides of [4,6] -> [4,2,3]:
  # dim 0 is the most minor in both.
  assert rm.reshape_is_bitcast(_s("f32[4,6]{0,1}"), _s("f32[4,2,3]{0,2,1}"))
  assert not rm.reshape_is_bitcast(_s("f32[4,6]{0,1}"),
                                   _s("f32[4,2,3]{0,1,2}"))


def test_reshape_is_bitcast_element_type_and_count():
  assert not rm.reshape_is_bitcast(_s("f32[6]"), _s("s32[6]"))
  assert not rm.reshape_is_bitcast(_s("f32[6]"), _s("f32[5]"))


def test_transpose_is_bitcast():
  # [2,3]{1,0} transposed to [3,2] stored column-major is the same buffer.
  assert rm.transpose_is_bitcast(_s("f32[2,3]{1,0}"), _s("f32[3,2]{0,1}"),
                                 (1, 0))
  assert not rm.transpose_is_bitcast(_s("f32[2,3]{1,0}"),
                                     _s("f32[3,2]{1,0}"), (1, 0))
  # Unit dimensions may move freely.
  assert rm.transpose_is_bitcast(_s("f32[1,5]{1,0}"), _s("f32[5,1]{1,0}"),
                                 (1, 0))


def test_constant_below_reshape_of_a_scalar_stays_a_scalar():
  # The constant is rewritten in the reshape's input shape, f32[]: its
  # literal must be 0-d (numpy's ascontiguousarray makes it 1-d, which
  # Literal refused).
  _check("""a = f32[] parameter(0)
  b = f32[] parameter(1)
  ra = f32[1] reshape(a)
  rb = f32[1] reshape(b)
  c = f32[1] constant({2.5})
  s = f32[1] add(ra, rb)
  ROOT r = f32[1] multiply(s, c)""", """
  CHECK: constant(2.5)
  CHECK: ROOT {{.*}} = f32[1]{0} reshape(""")
