"""Tests for parsing attribute values (value_parser)."""

import pytest

import support
from xla import xla_data as xd
from xla.hlo.ir import hlo_printer as pr
from xla.hlo.parser.value_parser import ValueParser


def _value(method, text):
  parser = ValueParser(text)
  value = getattr(parser, method)()
  assert parser.tok.kind.name == "EOF"
  return value


def test_window_and_dim_labels():
  w = _value("parse_window", "{size=3x3 pad=0_1x1_1 stride=2x2 "
             "rhs_reversal=1x0}")
  assert w.to_string() == "size=3x3 stride=2x2 pad=0_1x1_1 rhs_reversal=1x0"
  assert w.dimensions[0].window_reversal and not w.dimensions[1].window_reversal
  assert _value("parse_window", "{}") == xd.Window()
  d = _value("parse_dim_labels", "b0f_0io->b0f")
  assert (d.input_batch_dimension, d.input_feature_dimension,
          d.input_spatial_dimensions) == (0, 2, (1,))
  assert pr.dim_labels_to_string(d) == "b0f_0io->b0f"
  with pytest.raises(support.InvalidArgumentError, match="same size"):
    _value("parse_window", "{size=3x3 stride=2}")
  with pytest.raises(support.InvalidArgumentError, match="unique"):
    _value("parse_dim_labels", "bb0_0io->b0f")
  with pytest.raises(support.InvalidArgumentError, match="spatial"):
    _value("parse_dim_labels", "b01f_0io->b0f")


def test_other_attribute_values():
  assert _value("parse_slice_ranges", "{[0:2], [1:9:2]}") == (
      (0, 2, 1), (1, 9, 2))
  pc = _value("parse_padding_config", "1_2_1x0_-1")
  assert pc.dimensions[1] == xd.PaddingDimension(0, -1, 0)
  groups = _value("parse_replica_groups", "[2,2]<=[2,2]T(1,0)")
  assert groups.replica_groups() == ((0, 2), (1, 3))
  assert _value("parse_replica_groups", "{{0,1},{}}") == ((0, 1), ())
  md = _value("parse_metadata", '{op_name="x" source_line=3, '
              'stack_frame_id=1}')
  assert md == xd.OpMetadata(op_name="x", source_line=3, stack_frame_id=1)
  fa = _value("parse_frontend_attributes", '{a="1",b={"k": "v"}}')
  assert fa == {"a": "1", "b": '{"k": "v"}'}
  assert _value("parse_bool_list", "true") == (True,)
  assert _value("parse_bool_list", "{true,false}") == (True, False)
  al = _value("parse_aliasing", "{{0}: (1, {}), {}: (0, {2})}")
  assert al[1] == xd.OutputOperandAliasing((), 0, (2,))
  assert _value("parse_raw_braced", '{devices=[2]0,1 metadata={a="}"}}') == (
      '{devices=[2]0,1 metadata={a="}"}}')
