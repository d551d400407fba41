"""Tests for xla.xla_data: the window text form and iota replica groups."""

from xla import xla_data as xd


def _dim(size, **kw):
  return xd.WindowDimension(size=size, **kw)


def test_window_prints_only_non_default_fields():
  w = xd.Window((_dim(3), _dim(3)))
  assert w.to_string() == "size=3x3"
  w = xd.Window((_dim(3, stride=2, padding_low=0, padding_high=1),
                 _dim(3, stride=2, padding_low=1, padding_high=1)))
  assert w.to_string() == "size=3x3 stride=2x2 pad=0_1x1_1"
  w = xd.Window((_dim(2, base_dilation=2, window_dilation=3,
                      window_reversal=True),))
  assert w.to_string() == "size=2 lhs_dilate=2 rhs_dilate=3 rhs_reversal=1"


def test_iota_replica_groups_expand():
  groups = xd.IotaReplicaGroupList(2, 2, (2, 2), (1, 0))
  # arange(4).reshape(2, 2).T = [[0, 2], [1, 3]]
  assert groups.replica_groups() == ((0, 2), (1, 3))
  plain = xd.IotaReplicaGroupList(1, 4, (4,), (0,))
  assert plain.replica_groups() == ((0, 1, 2, 3),)


def test_metadata_emptiness():
  assert xd.OpMetadata().is_empty()
  assert not xd.OpMetadata(stack_frame_id=2).is_empty()
