"""Tests for HloSchedule."""

import pytest

import support
from xla.hlo.parser import hlo_parser as hp
from xla.service import hlo_schedule as hs

TEXT = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  b = f32[4] abs(p)
  ROOT r = f32[4] add(a, b)
}
"""


def _setup():
  m = hp.parse_and_return_unverified_module(TEXT)
  comp = m.entry_computation
  names = {i.name: i for i in comp.instructions}
  return m, comp, names


def test_valid_orders_verify():
  m, comp, n = _setup()
  s = hs.HloSchedule(m)
  s.set_sequence(comp, [n["p"], n["b"], n["a"], n["r"]])
  s.verify()
  assert [i.name for i in s.sequence(comp)] == ["p", "b", "a", "r"]
  assert s.is_computation_scheduled(comp)
  assert "computation e:" in s.to_string()


@pytest.mark.parametrize("order,message", [
    (["p", "a", "r", "b"], "before its dependency b"),
    (["p", "a", "b"], "misses r"),
    (["p", "a", "a", "b", "r"], "a twice"),
])
def test_invalid_orders_fail(order, message):
  m, comp, n = _setup()
  s = hs.HloSchedule(m)
  s.set_sequence(comp, [n[x] for x in order])
  with pytest.raises(support.FailedPreconditionError, match=message):
    s.verify()


def test_unscheduled_computation_and_text_order():
  m, comp, _ = _setup()
  with pytest.raises(support.NotFoundError):
    hs.HloSchedule(m).sequence(comp)
  s = hs.schedule_from_text_order(m, [comp])
  assert [i.name for i in s.sequence(comp)] == ["p", "a", "b", "r"]
