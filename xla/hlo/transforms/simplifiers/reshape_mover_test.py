"""Tests for ReshapeMover and the bitcast predicates."""

import numpy as np
import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import pass_test_util
from xla.hlo.transforms.simplifiers import reshape_mover as rm
from xla.service import hlo_verifier


def _run(body):
  module = hp.parse_and_return_verified_module(
      f"HloModule m\nENTRY e {{\n{body}\n}}")
  before = module.clone()
  changed = rm.ReshapeMover().run(module)
  hlo_verifier.verify(module)
  pass_test_util.assert_same_results(before, module)
  return changed, module.entry_computation.root_instruction


def test_two_reshapes_sink_below_add():
  changed, root = _run("""a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ra = f32[6] reshape(a)
  rb = f32[6] reshape(b)
  ROOT r = f32[6] add(ra, rb)""")
  assert changed
  assert root.opcode == HloOpcode.kReshape
  add = root.operand(0)
  assert add.opcode == HloOpcode.kAdd
  assert add.shape.dimensions == (2, 3)
  assert [o.name for o in add.operands] == ["a", "b"]
  # Both old reshapes are gone.
  names = {i.name for i in root.parent.instructions}
  assert "ra" not in names and "rb" not in names


def test_transposes_sink_below_compare_keep_direction():
  changed, root = _run("""a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ta = f32[3,2] transpose(a), dimensions={1,0}
  tb = f32[3,2] transpose(b), dimensions={1,0}
  ROOT r = pred[3,2] compare(ta, tb), direction=LT""")
  assert changed
  assert root.opcode == HloOpcode.kTranspose
  assert root.dimensions == (1, 0)
  cmp = root.operand(0)
  assert cmp.shape.dimensions == (2, 3)
  assert cmp.comparison_direction.name == "LT"


def test_scalar_broadcast_is_rebroadcast():
  changed, root = _run("""a = f32[2,3] parameter(0)
  s = f32[] parameter(1)
  ra = f32[3,2] reshape(a)
  bs = f32[3,2] broadcast(s), dimensions={}
  ROOT r = f32[3,2] multiply(ra, bs)""")
  assert changed
  mul = root.operand(0)
  assert mul.operand(0).name == "a"
  assert mul.operand(1).opcode == HloOpcode.kBroadcast
  assert mul.operand(1).shape.dimensions == (2, 3)


def test_constant_is_inversely_transposed():
  changed, root = _run("""a = s32[2,3] parameter(0)
  t = s32[3,2] transpose(a), dimensions={1,0}
  c = s32[3,2] constant({{1,2},{3,4},{5,6}})
  ROOT r = s32[3,2] add(t, c)""")
  assert changed
  const = root.operand(0).operand(1)
  assert const.opcode == HloOpcode.kConstant
  # transpose(c') must equal c: c' = c^T.
  np.testing.assert_array_equal(const.literal.array,
                                np.array([[1, 3, 5], [2, 4, 6]]))


def test_chain_moves_down():
  changed, root = _run("""a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ra = f32[6] reshape(a)
  rb = f32[6] reshape(b)
  s = f32[6] add(ra, rb)
  ROOT n = f32[6] negate(s)""")
  assert changed
  assert root.opcode == HloOpcode.kReshape
  assert root.operand(0).opcode == HloOpcode.kNegate
  assert root.operand(0).operand(0).opcode == HloOpcode.kAdd


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
  changed, _ = _run(body)
  assert not changed, name


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
