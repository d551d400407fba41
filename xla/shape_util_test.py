"""Tests for xla.shape_util."""

import pytest

import support
from xla import shape_util as su
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P

F32_2x3 = su.make_shape(P.F32, (2, 3))


def test_compatible_ignores_layout_and_dynamism():
  a = su.make_shape_with_layout(P.F32, (2, 3), (1, 0))
  b = su.make_shape_with_layout(P.F32, (2, 3), (0, 1))
  c = su.make_shape(P.F32, (2, 3), (True, False))
  assert su.compatible(a, b) and su.compatible(a, c)
  assert not su.compatible(a, su.make_shape(P.S32, (2, 3)))
  assert not su.compatible(a, su.make_shape(P.F32, (3, 2)))
  assert not su.equal_ignoring_layout(a, c)
  assert su.equal_ignoring_layout(a, b)
  t1 = su.make_tuple_shape([a, su.scalar(P.S32)])
  t2 = su.make_tuple_shape([b, su.scalar(P.S32)])
  assert su.compatible(t1, t2)
  assert not su.compatible(t1, su.make_tuple_shape([a]))
  assert su.compatible_ignoring_element_type(
      a, su.make_shape(P.PRED, (2, 3)))


def test_sizes():
  assert su.element_count(F32_2x3) == 6
  assert su.element_count(su.scalar(P.F32)) == 1
  assert su.byte_size_of(F32_2x3) == 24
  assert su.byte_size_of(su.make_shape(P.S4, (3,))) == 2  # packed nibbles
  assert su.byte_size_of(su.make_shape(P.C128, (2,))) == 32
  assert su.byte_size_of(su.make_tuple_shape([F32_2x3, F32_2x3])) == 16
  with pytest.raises(support.InvalidArgumentError):
    su.element_count(Shape.token())


def test_shape_index_navigation():
  inner = su.make_tuple_shape([su.scalar(P.S32), Shape.token()])
  t = su.make_tuple_shape([F32_2x3, inner])
  assert su.get_subshape(t, (1, 0)) == su.scalar(P.S32)
  assert su.get_subshape(t, ()) == t
  with pytest.raises(support.InvalidArgumentError, match="invalid shape"):
    su.get_subshape(t, (2,))
  assert su.is_valid_index(t, (1, 1)) and not su.is_valid_index(t, (0, 0))
  assert [i for i, _ in su.leaf_shapes(t)] == [(0,), (1, 0), (1, 1)]
  assert su.leaf_count(t) == 3
  assert su.is_nested_tuple(t) and not su.is_empty_tuple(t)
  assert su.tuple_element_count(t) == 2


def test_default_layouts():
  t = su.make_tuple_shape([F32_2x3, su.scalar(P.F32)])
  filled = su.with_default_layouts(t)
  assert str(filled) == "(f32[2,3]{1,0}, f32[])"
  assert filled.tuple_shapes[1].layout is not None
  kept = su.with_default_layouts(
      su.make_shape_with_layout(P.F32, (2, 3), (0, 1)))
  assert kept.layout.minor_to_major == (0, 1)
  assert su.minor_to_major(F32_2x3) == (1, 0)
  assert su.has_default_layout(filled)


def test_permute_and_retype():
  s = su.make_shape(P.F32, (2, 3, 4))
  assert su.permute_dimensions((2, 0, 1), s).dimensions == (4, 2, 3)
  assert su.change_element_type(s, P.S8).element_type == P.S8
  assert su.shape_index_to_string((1, 0)) == "{1,0}"
