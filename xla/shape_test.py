"""Tests for xla.shape: construction, validation and the text forms."""

import pytest

import support
from xla.layout import Layout
from xla.shape import ProgramShape
from xla.shape import Shape
from xla.shape import UNBOUNDED_SIZE
from xla.xla_data import PrimitiveType as P


def test_text_forms():
  assert str(Shape.array(P.F32, (4, 2), (1, 0))) == "f32[4,2]{1,0}"
  assert Shape.array(P.F32, (4, 2), (1, 0)).to_string() == "f32[4,2]"
  assert str(Shape.array(P.F32, (), ())) == "f32[]"  # no `{}` on scalars
  assert str(Shape.tuple_of([Shape.array(P.F32, (2,)),
                             Shape.array(P.S32)])) == "(f32[2], s32[])"
  assert str(Shape.token()) == "token[]"
  assert str(Shape.opaque()) == "opaque[]"
  assert str(Shape.array(P.F32, (4,), dynamic_dimensions=(True,))) == (
      "f32[<=4]")
  assert str(Shape(P.F32, (UNBOUNDED_SIZE, 3), (True, False))) == "f32[?,3]"
  assert str(Shape.buffer(Shape.array(P.F32, (4,)))) == "b(f32[4])"
  assert str(Shape.tuple_of([])) == "()"


def test_tuple_index_annotations():
  elems = [Shape.array(P.S32)] * 7
  assert Shape.tuple_of(elems).to_string() == (
      "(s32[], s32[], s32[], s32[], s32[], /*index=5*/s32[], s32[])")


def test_predicates():
  s = Shape.array(P.F32, (2, 3), (1, 0))
  assert s.is_array() and not s.is_tuple() and s.rank == 2
  assert Shape.array(P.PRED).is_scalar()
  nested = Shape.tuple_of([s, Shape.tuple_of([Shape.token()])])
  assert nested.is_tuple() and nested.has_layout()
  assert not Shape.tuple_of([Shape.array(P.F32, (2,))]).has_layout()
  assert Shape.array(P.F32, (2,), dynamic_dimensions=(True,)).is_dynamic()
  assert nested.without_layout().tuple_shapes[0].layout is None
  assert s.with_layout((0, 1)).layout == Layout((0, 1))


@pytest.mark.parametrize("make,match", [
    (lambda: Shape(P.F32, (-1,)), "negative"),
    (lambda: Shape(P.TUPLE, (2,)), "no dimensions"),
    (lambda: Shape(P.TOKEN, (1,)), "no dimensions"),
    (lambda: Shape(P.F32, (2, 2), layout=Layout((0,))), "rank"),
    (lambda: Shape(P.F32, (2, 2), layout=Layout((0, 0))), "permutation"),
    (lambda: Shape(P.F32, (UNBOUNDED_SIZE,)), "unbounded"),
    (lambda: Shape(P.F32, tuple_shapes=(Shape(P.F32),)), "element shapes"),
    (lambda: Shape(P.TUPLE, layout=Layout(())), "layout"),
])
def test_invalid_shapes_raise(make, match):
  with pytest.raises(support.InvalidArgumentError, match=match):
    make()


def test_equality_includes_layout():
  a = Shape.array(P.F32, (2, 2), (1, 0))
  assert a == Shape.array(P.F32, (2, 2), (1, 0))
  assert a != Shape.array(P.F32, (2, 2), (0, 1))
  assert a != a.without_layout()
  assert hash(a) == hash(Shape.array(P.F32, (2, 2), (1, 0)))


def test_program_shape_text():
  ps = ProgramShape((Shape.array(P.F32, (2,), (0,)),), Shape.array(P.F32),
                    ("x",))
  assert ps.to_string() == "(x: f32[2]) -> f32[]"
  assert ps.to_string(print_layout=True) == "(x: f32[2]{0}) -> f32[]"


def test_layout_changes_that_change_nothing_keep_the_shape():
  # Shapes are immutable, so these may (and do) return the shape itself.
  plain = Shape.array(P.F32, (2, 3))
  assert plain.without_layout() is plain
  laid = Shape.array(P.F32, (2, 3), (1, 0))
  assert laid.with_layout((1, 0)) is laid
  assert laid.with_layout(Layout((1, 0))) is laid
  assert laid.without_layout() == plain and laid.without_layout() is not laid
  assert laid.with_layout((0, 1)).layout == Layout((0, 1))
  assert plain.with_layout(None) is plain
  assert laid.with_layout(None) == plain
  tup = Shape.tuple_of([plain, Shape.token()])
  assert tup.without_layout() is tup
  mixed = Shape.tuple_of([laid, plain])
  stripped = mixed.without_layout()
  assert stripped == Shape.tuple_of([plain, plain])
  assert stripped.tuple_shapes[1] is plain


def test_element_type_and_dims_are_normalized():
  s = Shape(int(P.F32), [2, True])
  assert type(s.element_type) is P and s.element_type == P.F32
  assert s.dimensions == (2, 1) and type(s.dimensions[1]) is int
  assert s.dynamic_dimensions == (False, False)
