"""Tests for HloInstruction: operands/users, attributes and creation."""

import numpy as np
import pytest

import support
from xla import xla_data
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.literal import Literal
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P

F32 = Shape.array(P.F32, (), ())
V4 = Shape.array(P.F32, (4,), (0,))


def _params(n=2, shape=V4):
  return [hi.create_parameter(i, shape, f"p{i}") for i in range(n)]


def test_users_follow_operands():
  a, b = _params()
  add = hi.create_binary(V4, O.kAdd, a, a)
  assert add.operands == (a, a)
  assert a.users == (add,)  # one entry even when used twice
  add.replace_operand_with(0, b)
  assert a.users == (add,) and b.users == (add,)
  add.replace_operand_with(1, b)
  assert a.users == () and add.operands == (b, b)


def test_set_operands_rewires_users():
  a, b, c = _params(3)
  t = hi.create_binary(V4, O.kAdd, a, b)
  t.set_operands([c, a])
  assert t.operands == (c, a)
  assert b.users == () and c.users == (t,) and a.users == (t,)
  t.set_operands([c, c, a])
  assert t.operands == (c, c, a)
  assert b.users == ()  # dropped
  assert c.users == (t,)  # one entry although listed twice
  assert a.users == (t,)  # kept, not duplicated
  t.set_operands([])
  assert a.users == () and c.users == ()


def test_replace_all_uses_with_updates_root():
  comp = HloComputation("c")
  a, b = [comp.add_instruction(p) for p in _params()]
  neg = comp.add_instruction(hi.create_unary(V4, O.kNegate, a))
  comp.set_root_instruction(neg)
  a.replace_all_uses_with(b)
  assert neg.operands == (b,) and a.users == ()
  neg.replace_all_uses_with(b)
  assert comp.root_instruction is b


def test_attributes_and_defaults():
  a, = _params(1)
  sort = hi.create(O.kSort, V4, [a], dimensions=(0,))
  assert sort.attr("is_stable") is False  # schema default
  assert not sort.has_attr("is_stable")
  sort.set_attr("is_stable", True)
  assert sort.attrs["is_stable"] is True
  sort.set_attr("is_stable", None)
  assert "is_stable" not in sort.attrs
  with pytest.raises(support.InvalidArgumentError, match="no attribute"):
    sort.set_attr("window", xla_data.Window())
  with pytest.raises(support.InvalidArgumentError, match="no attribute"):
    hi.create(O.kAdd, V4, [a, a], dimensions=(0,))
  gte_shape = Shape.tuple_of([V4, F32])
  t = hi.HloInstruction(O.kParameter, gte_shape)
  with pytest.raises(support.InvalidArgumentError, match="out of range"):
    hi.create_get_tuple_element(t, 2)
  assert hi.create_get_tuple_element(t, 1).shape == F32


def test_typed_accessors():
  a, b = _params()
  dot = hi.create_dot(F32, a, b, xla_data.DotDimensionNumbers(
      lhs_contracting_dimensions=(0,), rhs_contracting_dimensions=(0,)))
  assert dot.dot_dimension_numbers.lhs_contracting_dimensions == (0,)
  assert dot.dot_dimension_numbers.lhs_batch_dimensions == ()
  sl = hi.create_slice(Shape.array(P.F32, (2,)), a, [1], [3])
  assert (sl.slice_starts, sl.slice_limits, sl.slice_strides) == (
      (1,), (3,), (1,))
  cmp = hi.create_compare(Shape.array(P.PRED, (4,)), a, b,
                          xla_data.ComparisonDirection.LT)
  assert cmp.comparison_direction == xla_data.ComparisonDirection.LT
  cmp.set_attr("direction", "GE")  # the text spelling works too
  assert cmp.comparison_direction == xla_data.ComparisonDirection.GE
  with pytest.raises(support.InvalidArgumentError, match="expected one of"):
    cmp.set_attr("direction", "BIGGER")
  assert cmp.is_elementwise() and not dot.is_elementwise()


def test_called_computations_in_schema_order():
  cond, body = HloComputation("cond"), HloComputation("body")
  a, = _params(1)
  w = hi.create_while(V4, cond, body, a)
  assert w.called_computations() == [cond, body]
  assert (w.while_condition, w.while_body) == (cond, body)
  other = HloComputation("other")
  w.replace_called_computation(body, other)
  assert w.while_body is other
  fused = HloComputation("fused")
  f = hi.create_fusion(V4, hlo_attrs.FusionKind.kLoop, [a], fused)
  assert fused.fusion_instruction is f and f.fused_computation is fused


def test_control_dependencies():
  a, b = _params()
  a.add_control_dependency_to(b)
  assert a.control_successors == [b] and b.control_predecessors == [a]
  b.drop_all_control_deps()
  assert a.control_successors == [] and b.control_predecessors == []


def test_side_effects_and_text():
  a, = _params(1)
  cc = hi.create_custom_call(V4, [a], "foo")
  assert not cc.has_side_effect()
  cc.set_attr("custom_call_has_side_effect", True)
  assert cc.has_side_effect()
  assert cc.to_string() == (
      'custom-call = f32[4]{0} custom-call(p0), custom_call_target="foo", '
      'custom_call_has_side_effect=true')
  c = hi.create_constant(Literal.from_array(np.array([1, 2], np.int32)))
  assert c.to_string() == "constant = s32[2]{0} constant({1, 2})"
  assert a.to_string() == "p0 = f32[4]{0} parameter(0)"
  with pytest.raises(support.InvalidArgumentError, match="Shape"):
    hi.HloInstruction(O.kAdd, "f32[]")
