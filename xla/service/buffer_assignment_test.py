"""Tests for buffer assignment: reuse, no-reuse cases, in-place updates."""

import pytest

from xla.hlo.parser import hlo_parser as hp
from xla.service import buffer_assignment as ba
from xla.service import hlo_dataflow_analysis as dfa
from xla.service import hlo_schedule as hs
from xla.service import memory_test_util

parse = hp.parse_and_return_unverified_module

CHAIN = """HloModule m
ENTRY e {
  p = f32[100] parameter(0)
  a = f32[100] negate(p)
  b = f32[100] exponential(a)
  c = f32[100] negate(b)
  d = f32[100] exponential(c)
  ROOT r = f32[100] negate(d)
}
"""


def _assign(text, text_order=True):
  m = parse(text)
  sched = None
  if text_order:
    sched = hs.schedule_from_text_order(
        m, dfa.HloDataflowAnalysis.run(m).computations)
  return m, ba.assign_buffers(m, sched)


def _i(m, name, comp=None):
  return (comp or m.entry_computation).get_instruction_with_name(name)


def test_chain_reuses_buffers():
  m, asg = _assign(CHAIN)
  e = lambda n: _i(m, n)
  # a [1,2], b [2,3], c [3,4], d [4,5]: two 400-byte slots suffice.
  assert asg.heap_size == 800
  assert asg.shares_storage(e("a"), (), e("c"), ())
  assert asg.shares_storage(e("b"), (), e("d"), ())
  assert not asg.shares_storage(e("a"), (), e("b"), ())
  # p, r own allocations + the heap; without reuse 6 buffers of 400.
  assert asg.total_allocation_bytes() == 400 + 400 + 800
  assert asg.no_reuse_bytes() == 2400
  # Live at once at most: p + a + b (t=2) or p + d + r (t=5).
  assert asg.peak_live_bytes() == 1200
  report = ba.peak_memory_report(parse(CHAIN))
  assert report["total_with_reuse"] == 1600 < report["total_without_reuse"]
  assert report["ratio"] == pytest.approx(1600 / 2400)


def test_overlapping_lives_output_and_parameter_not_reused():
  m, asg = _assign("""HloModule m
ENTRY e {
  p = f32[100] parameter(0)
  a = f32[100] negate(p)
  b = f32[100] exponential(p)
  c = f32[100] add(a, b)
  d = f32[100] negate(c)
  ROOT r = f32[100] add(d, d)
}
""")
  e = lambda n: _i(m, n)
  assert not asg.shares_storage(e("a"), (), e("b"), ())  # both live at c
  # d reuses a's or b's slot (both dead after c), never p's nor r's.
  assert asg.shares_storage(e("d"), (), e("a"), ()) or asg.shares_storage(
      e("d"), (), e("b"), ())
  for n in ["a", "b", "c", "d"]:
    assert not asg.shares_storage(e("p"), (), e(n), ())
    assert not asg.shares_storage(e("r"), (), e(n), ())
  kinds = {a.kind: a.size for a in asg.allocations}
  assert kinds == {"parameter": 400, "output": 400, "temp": 1200}


def test_in_place_dynamic_update_slice():
  text = """HloModule m
ENTRY e {
  p = f32[100] parameter(0)
  u = f32[10] parameter(1)
  i = s32[] parameter(2)
  a = f32[100] negate(p)
  d = f32[100] dynamic-update-slice(a, u, i)
  ROOT r = f32[100] %R%
}
"""
  m, asg = _assign(text.replace("%R%", "negate(d)"))
  assert asg.shares_storage(_i(m, "a"), (), _i(m, "d"), ())
  assert [(x.name, idx) for x, idx in asg.in_place] == [("d", ())]
  assert asg.heap_size == 400
  # a still read after the update: no in-place.
  m, asg = _assign(text.replace("%R%", "add(d, a)"))
  assert not asg.shares_storage(_i(m, "a"), (), _i(m, "d"), ())
  assert asg.in_place == []
  # Updating a parameter in place would clobber the caller's input.
  m, asg = _assign(text.replace("a = f32[100] negate(p)\n", "").replace(
      "dynamic-update-slice(a", "dynamic-update-slice(p").replace(
          "%R%", "negate(d)"))
  assert not asg.shares_storage(_i(m, "p"), (), _i(m, "d"), ())
  assert asg.in_place == []


def test_in_place_scatter():
  m, asg = _assign("""HloModule m
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
ENTRY e {
  p = f32[4,8] parameter(0)
  i = s32[2,1] parameter(1)
  u = f32[2,8] parameter(2)
  a = f32[4,8] negate(p)
  sc = f32[4,8] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  ROOT r = f32[4,8] abs(sc)
}
""")
  assert asg.shares_storage(_i(m, "a"), (), _i(m, "sc"), ())
  assert asg.heap_size == 128


def test_while_carry_in_place_when_init_dies():
  m, asg = _assign(memory_test_util.while_loop("negate(g)"))
  w, x, z = _i(m, "w"), _i(m, "xe"), _i(m, "z")
  body = m.get_computation_with_name("body")
  assert asg.shares_storage(w, (1,), x, ())
  assert asg.shares_storage(w, (1,), _i(m, "x2", body), ())
  assert not asg.shares_storage(w, (0,), z, ())  # constants never reused
  assert (w, (1,)) in asg.in_place
  # x read again after the loop: the carry needs its own buffer.
  m, asg = _assign(memory_test_util.while_loop("add(g, xe)"))
  assert not asg.shares_storage(_i(m, "w"), (1,), _i(m, "xe"), ())
  assert (_i(m, "w"), (1,)) not in asg.in_place


def test_memory_scheduled_assignment_and_report_keys():
  m = parse(memory_test_util.while_loop())
  asg = ba.assign_buffers(m)
  assert asg.total_allocation_bytes() <= asg.no_reuse_bytes()
  rep = ba.peak_memory_report(m)
  assert rep["in_place_updates"] >= 1
  assert rep["parameter_bytes"] == 400 and rep["output_bytes"] == 400
  assert rep["constant_bytes"] == 4 + 4 + 4  # z, one, n
  assert set(rep["scheduler"]) == {"list", "dfs", "post_order"}


def test_best_fit_heap():
  h = ba.BestFitHeap()
  a, b, c = h.alloc(100), h.alloc(50), h.alloc(100)
  assert (a, b, c) == (0, 100, 150)
  h.release(a, 100)
  h.release(b, 50)  # coalesces to one 150-byte hole at 0
  assert h.alloc(120) == 0
  assert h.alloc(40) == 250  # the 30-byte hole is too small: top grows
  assert h.peak == 290
  h2 = ba.BestFitHeap(alignment=64)
  assert h2.alloc(1) == 0 and h2.alloc(1) == 64


READ_ONLY_CARRY = """HloModule ro

body {
  p = (s32[], f32[100], f32[100]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  w = f32[100] get-tuple-element(p), index=1
  x = f32[100] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[100] add(x, w)
  ROOT t = (s32[], f32[100], f32[100]) tuple(i2, w, x2)
}

cond {
  p = (s32[], f32[100], f32[100]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY e {
  wp = f32[100] parameter(0)
  xp = f32[100] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[100], f32[100]) tuple(z, wp, xp)
  loop = (s32[], f32[100], f32[100]) while(init), condition=cond, body=body
  g = f32[100] get-tuple-element(loop), index=2
  gw = f32[100] get-tuple-element(loop), index=1
  ROOT r = f32[100] add(g, gw)
}
"""


def test_read_only_while_carry_shares_its_init_storage():
  m, asg = _assign(READ_ONLY_CARRY)
  loop, wp, xp, z = (_i(m, n) for n in ("loop", "wp", "xp", "z"))
  # Element 1 only passes through the body: it stays in the parameter.
  assert asg.shares_storage(loop, (1,), wp, ())
  assert asg.group_at(loop, (1,)).kind == ba.PARAMETER
  # Elements the body writes (the counter, x) never live in a parameter
  # or a constant.
  assert not asg.shares_storage(loop, (2,), xp, ())
  assert not asg.shares_storage(loop, (0,), z, ())
  assert asg.group_at(loop, (2,)).kind == ba.TEMP
