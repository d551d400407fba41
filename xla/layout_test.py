"""Tests for xla.layout."""

from xla import layout as L
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P


def test_plain_layouts():
  assert L.Layout((1, 0)).to_string() == "{1,0}"
  assert L.Layout(()).to_string() == "{}"
  assert L.default_layout(3) == L.Layout((2, 1, 0))
  assert L.default_layout(2).is_default_for_rank()
  assert not L.Layout((0, 1)).is_default_for_rank()


def test_extras_print_in_xla_order():
  layout = L.Layout(
      (1, 0), tiles=((8, 128), (2, 1)), tail_padding_alignment_in_elements=4,
      index_primitive_type=P.U32, pointer_primitive_type=P.U16,
      element_size_in_bits=4, memory_space=1,
      split_configs=(L.SplitConfig(0, (512, 1024)),),
      dynamic_shape_metadata_prefix_bytes=8)
  assert layout.to_string() == (
      "{1,0:T(8,128)(2,1)L(4)#(u32)*(u16)E(4)S(1)SC(0:512,1024)M(8)}")


def test_dim_levels_combine_tiles_and_physical_shape():
  layout = L.Layout((0,), dim_level_types=(
      L.DimLevel("D"), L.DimLevel("C", unique=False),
      L.DimLevel("S", ordered=False)))
  assert layout.to_string() == "{0:D(D,C+,S~)}"
  assert L.Layout((0,), tiles=((L.COMBINE_DIMENSION, 2),)).to_string() == (
      "{0:T(*,2)}")
  phys = Shape.array(P.S32, (4,), (0,))
  assert L.Layout((0,), physical_shape=phys).to_string() == (
      "{0:P(s32[4]{0})}")
