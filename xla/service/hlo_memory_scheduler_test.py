"""Tests for the memory schedulers: order changes the peak."""

import pytest

import support
from xla.hlo.parser import hlo_parser as hp
from xla.service import hlo_memory_scheduler as ms
from xla.service import memory_test_util

parse = hp.parse_and_return_unverified_module

# X (100 bytes) is operand 0 of the root, cheap and small; Y needs a 1000
# byte temporary e. Post-order makes X first, so X waits while e is live.
ORDER_MATTERS = """HloModule m
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
ENTRY e {
  p0 = f32[25] parameter(0)
  p1 = f32[250] parameter(1)
  X = f32[25] exponential(p0)
  e = f32[250] exponential(p1)
  c0 = f32[] constant(0)
  r = f32[] reduce(e, c0), dimensions={0}, to_apply=add
  Y = f32[25] broadcast(r), dimensions={}
  ROOT s = f32[25] add(X, Y)
}
"""


def _names(seq):
  return [i.name for i in seq]


def test_order_changes_peak_and_default_picks_lowest():
  m = parse(ORDER_MATTERS)
  schedule, report = ms.schedule_module(m)
  peaks = report.computations["e"].peaks
  # Post-order p0 X p1 e c0 r Y s: X(100)+e(1000)+c0(4)+r(4) live at r.
  assert peaks[ms.POST_ORDER] == 1108
  # DFS runs the bigger subtree (Y's, 1108 bytes) first: e+c0+r = 1008.
  assert peaks[ms.DFS] == 1008
  assert report.peak == 1008 < report.post_order_peak
  assert report.computations["e"].chosen == ms.DFS
  seq = _names(schedule.sequence(m.entry_computation))
  assert seq.index("r") < seq.index("X")
  assert ms.sequence_peak(m, m.entry_computation,
                          schedule.sequence(m.entry_computation)) == 1008


@pytest.mark.parametrize("algorithm", [ms.LIST, ms.DFS, ms.POST_ORDER])
def test_each_algorithm_gives_a_valid_schedule(algorithm):
  m = parse(memory_test_util.while_loop())
  schedule, report = ms.schedule_module(m, algorithm)
  schedule.verify()
  assert {c.name for c in schedule.computations} == {"e", "body", "cond"}
  assert report.computations["e"].chosen == algorithm


def test_list_scheduler_frees_shared_operand_early():
  # q has two readers, sb (reached first by post-order) and sa (last).
  # Post-order keeps q live while g is computed; the list scheduler runs sa
  # right after sb because that frees q.
  m = parse("""HloModule m
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
ENTRY e {
  p = f32[100] parameter(0)
  c = f32[] constant(0)
  q = f32[100] negate(p)
  sb = f32[] reduce(q, c), dimensions={0}, to_apply=add
  g = f32[100] abs(p)
  sg = f32[] reduce(g, c), dimensions={0}, to_apply=add
  bb = f32[] add(sb, sg)
  sa = f32[] reduce(q, c), dimensions={0}, to_apply=add
  ROOT t = (f32[], f32[]) tuple(bb, sa)
}
""")
  schedule, report = ms.schedule_module(m)
  peaks = report.computations["e"].peaks
  # Post-order p q c sb g sg ...: at sg q+c+sb+g+sg = 400+4+4+400+4.
  assert peaks[ms.POST_ORDER] == 812
  assert peaks[ms.DFS] == 812
  # List: ... q sb sa (q freed) g sg: at sg c+sb+sa+g+sg = 4+4+4+400+4.
  assert peaks[ms.LIST] == 416
  assert report.computations["e"].chosen == ms.LIST
  seq = _names(schedule.sequence(m.entry_computation))
  assert seq.index("sa") < seq.index("g")


def test_callee_peak_counts_inside_caller():
  m = parse(memory_test_util.while_loop())
  _, report = ms.schedule_module(m)
  body = report.computations["body"]
  # Body: one (4) is freed after i2 (4); x2 (400) and the root tuple's
  # table (16) reach the root: peak at t = 4 + 400 + 16.
  assert body.chosen_peak == 4 + 400 + 16
  # Entry: z(4)+x(400)+init(16), the while adds the body's peak + cond's.
  cond = report.computations["cond"].chosen_peak
  assert cond == 4 + 1
  assert report.peak >= 420 + 420 + 5


def test_unknown_algorithm():
  with pytest.raises(support.InvalidArgumentError, match="bogus"):
    ms.schedule_module(parse(ORDER_MATTERS), "bogus")
