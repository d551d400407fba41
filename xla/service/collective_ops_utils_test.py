"""Tests of collective_ops_utils: group modes and participant groups."""

import pytest

import support
from xla.hlo.parser import hlo_parser
from xla.service import collective_ops_utils as cou

_SUM = """sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _instr(root: str):
  module = hlo_parser.parse_and_return_unverified_module(f"""HloModule m
{_SUM}
ENTRY e {{
  x = f32[4] parameter(0)
  ROOT r = {root}
}}""")
  return module.entry_computation.root_instruction


@pytest.mark.parametrize("attrs,mode", [
    ("replica_groups={}", cou.GroupMode.CROSS_REPLICA),
    ("channel_id=1, replica_groups={}",
     cou.GroupMode.CROSS_REPLICA_AND_PARTITION),
    ("channel_id=1, replica_groups={}, use_global_device_ids=true",
     cou.GroupMode.FLATTENED_IDS),
])
def test_all_reduce_modes(attrs, mode):
  instr = _instr(f"f32[4] all-reduce(x), {attrs}, to_apply=sum")
  assert cou.group_mode(instr) == mode


def test_permute_and_all_to_all_modes():
  assert cou.group_mode(_instr(
      "f32[4] collective-permute(x), source_target_pairs={{0,1}}")) == (
          cou.GroupMode.CROSS_REPLICA)
  assert cou.group_mode(_instr(
      "f32[4] all-to-all(x), channel_id=2, replica_groups={{0,1}}, "
      "dimensions={0}")) == cou.GroupMode.CROSS_PARTITION


def test_global_ids_need_a_channel():
  instr = _instr("f32[4] all-reduce(x), replica_groups={}, "
                 "use_global_device_ids=true, to_apply=sum")
  with pytest.raises(support.InvalidArgumentError, match="channel id"):
    cou.group_mode(instr)


def test_participant_groups_in_every_mode():
  # 2 replicas x 3 partitions: (r, p) is participant 3r + p.
  ar = _instr("f32[4] all-reduce(x), replica_groups={{1,0}}, to_apply=sum")
  assert cou.participant_groups(ar, 2, 3) == [[3, 0], [4, 1], [5, 2]]
  ar = _instr("f32[4] all-reduce(x), channel_id=1, replica_groups={{1},{0}}, "
              "to_apply=sum")
  assert cou.participant_groups(ar, 2, 3) == [[3, 4, 5], [0, 1, 2]]
  a2a = _instr("f32[4] all-to-all(x), channel_id=1, "
               "replica_groups={{2,0},{1}}, dimensions={0}")
  assert cou.participant_groups(a2a, 2, 3) == [[2, 0], [1], [5, 3], [4]]
  ar = _instr("f32[4] all-reduce(x), channel_id=1, "
              "replica_groups=[2,3]<=[3,2]T(1,0), use_global_device_ids=true, "
              "to_apply=sum")
  assert cou.participant_groups(ar, 2, 3) == [[0, 2, 4], [1, 3, 5]]
  # Empty groups: everyone (of the mode's kind).
  ar = _instr("f32[4] all-reduce(x), channel_id=1, replica_groups={}, "
              "use_global_device_ids=true, to_apply=sum")
  assert cou.participant_groups(ar, 2, 3) == [[0, 1, 2, 3, 4, 5]]


def test_permute_pairs():
  cp = _instr("f32[4] collective-permute(x), channel_id=1, "
              "source_target_pairs={{0,1},{1,0}}")
  assert cou.permute_pairs(cp, 2, 2) == [(0, 1), (1, 0), (2, 3), (3, 2)]
  cp = _instr("f32[4] collective-permute(x), source_target_pairs={{0,1}}")
  assert cou.permute_pairs(cp, 2, 2) == [(0, 2), (1, 3)]
  cp = _instr("f32[4] collective-permute(x), channel_id=1, "
              "source_target_pairs={{0,1},{2,1}}")
  with pytest.raises(support.InvalidArgumentError, match="repeat"):
    cou.permute_pairs(cp, 1, 3)
  with pytest.raises(support.InvalidArgumentError, match="partition 2"):
    cou.permute_pairs(cp, 1, 2)


def test_ids_outside_the_program():
  ar = _instr("f32[4] all-reduce(x), channel_id=1, replica_groups={{0,5}}, "
              "use_global_device_ids=true, to_apply=sum")
  with pytest.raises(support.InvalidArgumentError,
                     match=r"participant 5, outside the program's 1 "
                     r"replica\(s\) x 4 partition\(s\)"):
    cou.participant_groups(ar, 1, 4)
