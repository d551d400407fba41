"""Tests for the HLO text printer: attribute spellings and layouts."""

import numpy as np

from xla import xla_data as xd
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_printer as pr
from xla.hlo.parser import hlo_parser
from xla.literal import Literal


def test_dim_labels():
  d = xd.ConvolutionDimensionNumbers(
      input_batch_dimension=0, input_feature_dimension=3,
      input_spatial_dimensions=(1, 2), kernel_input_feature_dimension=2,
      kernel_output_feature_dimension=3, kernel_spatial_dimensions=(0, 1),
      output_batch_dimension=0, output_feature_dimension=3,
      output_spatial_dimensions=(1, 2))
  assert pr.dim_labels_to_string(d) == "b01f_01io->b01f"
  nchw = xd.ConvolutionDimensionNumbers(0, 1, (2, 3), 1, 0, (2, 3), 0, 1,
                                        (2, 3))
  assert pr.dim_labels_to_string(nchw) == "bf01_oi01->bf01"


def test_padding_slices_groups_aliasing():
  no_interior = xd.PaddingConfig((xd.PaddingDimension(1, 2),
                                  xd.PaddingDimension(0, 1)))
  assert pr.padding_config_to_string(no_interior) == "1_2x0_1"
  interior = xd.PaddingConfig((xd.PaddingDimension(0, 0, 1),
                               xd.PaddingDimension(-1, 3)))
  assert pr.padding_config_to_string(interior) == "0_0_1x-1_3_0"
  assert pr.slice_ranges_to_string(((0, 4, 1), (0, 1, 1))) == (
      "{[0:4], [0:1]}")
  assert pr.slice_ranges_to_string(((1, 3, 1), (0, 9, 2))) == (
      "{[1:3:1], [0:9:2]}")
  assert pr.replica_groups_to_string(((0, 1), (2, 3))) == "{{0,1},{2,3}}"
  assert pr.replica_groups_to_string(()) == "{}"
  iota = xd.IotaReplicaGroupList(2, 4, (4, 2), (1, 0))
  assert pr.replica_groups_to_string(iota) == "[2,4]<=[4,2]T(1,0)"
  aliasing = (xd.OutputOperandAliasing((0,), 0, ()),
              xd.OutputOperandAliasing((), 1, (2,)))
  assert pr.aliasing_to_string(aliasing) == "{{0}: (0, {}), {}: (1, {2})}"


def test_metadata_frontend_attributes_backend_config():
  md = xd.OpMetadata(op_type="Add", op_name='jit(f)/"x"', source_line=3,
                     stack_frame_id=2)
  assert pr.metadata_to_string(md) == (
      '{op_type="Add" op_name="jit(f)/\\"x\\"" source_line=3 '
      'stack_frame_id=2}')
  attrs = {"z": "1", "a": '{"json": true}'}
  assert pr.frontend_attributes_to_string(attrs) == (
      '{a={"json": true},z="1"}')
  assert pr.string_or_dict("{uplo = 76 : ui8}") == "{uplo = 76 : ui8}"
  assert pr.string_or_dict("plain") == '"plain"'


def test_attr_value_kinds():
  spec = hlo_attrs.AttrSpec("x", hlo_attrs.AttrKind.FLOAT)
  assert pr.attr_value_to_string(spec, 0.001) == "0.001"
  spec = hlo_attrs.AttrSpec("l", hlo_attrs.AttrKind.LITERAL)
  lit = Literal.from_array(np.array([1, 2], np.int32))
  assert pr.attr_value_to_string(spec, lit) == "s32[2]{0} {1, 2}"


TEXT = """HloModule m, is_scheduled=true, entry_computation_layout={(f32[8]{0})->f32[8]{0}}, replica_count=2

%fused (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%p)
}

ENTRY %e (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0), sharding={replicated}
  ROOT %f = f32[8]{0} fusion(%a), kind=kLoop, calls=%fused, metadata={op_name="neg"}, backend_config="cfg"
}

"""


def test_long_form_and_options():
  m = hlo_parser.parse_and_return_unverified_module(TEXT)
  assert m.to_string(pr.HloPrintOptions.long_form()) == TEXT
  short = m.to_string(pr.HloPrintOptions.short())
  assert "metadata" not in short and "backend_config" not in short
  assert "ROOT f = f32[8]{0} fusion(a), kind=kLoop, calls=fused\n" in short
  assert "\nfused {\n" in short
  big = hlo_parser.parse_and_return_unverified_module(
      "HloModule b\nENTRY e {\n  ROOT c = s32[12]{0} constant({0, 1, 2, 3, "
      "4, 5, 6, 7, 8, 9, 10, 11})\n}\n")
  text = big.to_string(pr.HloPrintOptions(print_large_constants=False))
  assert "constant({...})" in text
