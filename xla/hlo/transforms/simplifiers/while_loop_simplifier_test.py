"""Tests for WhileLoopSimplifier: trip counts, 0/1-trip loops, dead carry
elements, and the cases where nothing may change."""

import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import while_loop_simplifier as wls
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _counted_loop(init, limit, step, direction="LT", cond_effect="",
                  body_extra=""):
  return f"""HloModule m

cond {{
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({limit}){cond_effect}
  ROOT c = pred[] compare(i, n), direction={direction}
}}

body {{
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant({step})
  i2 = s32[] add(i, one)
  x2 = f32[4] multiply(x, x){body_extra}
  ROOT t = (s32[], f32[4]) tuple(i2, x2)
}}

ENTRY e {{
  a = f32[4] parameter(0)
  z = s32[] constant({init})
  t = (s32[], f32[4]) tuple(z, a)
  w = (s32[], f32[4]) while(t), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}}
"""


def _check(text, expected):
  """Runs the pass on `text` and FileChecks the result against `expected`
  (None: nothing may change); a changed module must compute what the
  original did on the same random inputs."""
  return run_and_filecheck(text, wls.WhileLoopSimplifier(), expected,
                           check_results=expected is not None)


def _while(module):
  ws = [i for i in module.instructions() if i.opcode == HloOpcode.kWhile]
  return ws[0] if ws else None


@pytest.mark.parametrize("init,limit,step,direction,expected", [
    (0, 10, 1, "LT", 10),
    (0, 10, 3, "LT", 4),     # 0 3 6 9
    (0, 10, 1, "LE", 11),
    (5, 5, 1, "LT", 0),
    (7, 2, 1, "LT", 0),
    (10, 0, -2, "GT", 5),    # 10 8 6 4 2
    (10, 0, -2, "GE", 6),
    (0, 6, 2, "NE", 3),
    (0, 5, 2, "NE", None),   # never equal: unknown
    (0, 10, -1, "LT", None),  # runs until overflow: unknown
    (0, 2147483647, 2, "LT", None),  # last value overflows s32
])
def test_static_trip_count(init, limit, step, direction, expected):
  module = hp.parse_and_return_verified_module(
      _counted_loop(init, limit, step, direction))
  assert wls.static_trip_count(_while(module)) == expected


def test_trip_count_with_swapped_compare():
  text = _counted_loop(0, 4, 1).replace("compare(i, n), direction=LT",
                                        "compare(n, i), direction=GT")
  module = hp.parse_and_return_verified_module(text)
  assert wls.static_trip_count(_while(module)) == 4


def test_trip_count_needs_constant_init():
  text = _counted_loop(0, 4, 1).replace("z = s32[] constant(0)",
                                        "z = s32[] parameter(1)")
  module = hp.parse_and_return_verified_module(text)
  assert wls.static_trip_count(_while(module)) is None


def test_zero_trip_loop_is_removed():
  # The loop's value is its init, gte(tuple(z, a), 1); cond and body go.
  _check(_counted_loop(3, 3, 1), """
  CHECK:      HloModule m{{.*}}
  CHECK-NOT:  {
  CHECK:      ENTRY e {
  CHECK-NEXT:   a = f32[4]{0} parameter(0)
  CHECK-NEXT:   [[Z:z[.0-9]*]] = s32[] constant(3)
  CHECK-NEXT:   [[T:[a-z.0-9]+]] = (s32[], f32[4]{0}) tuple([[Z]], a)
  CHECK-NEXT:   ROOT {{[a-z.0-9]+}} = f32[4]{0} get-tuple-element([[T]]), index=1
  CHECK-NEXT: }
  CHECK-NOT:  {{.}}
  """)


def test_one_trip_loop_is_inlined():
  # The body runs once on the init tuple: x is element 1 of tuple(z, a).
  _check(_counted_loop(0, 1, 1), """
  CHECK-NOT:  while(
  CHECK:      ENTRY e {
  CHECK:        [[T:[a-z.0-9]+]] = (s32[], f32[4]{0}) tuple({{[a-z.0-9]+}}, a)
  CHECK:        [[X:[a-z.0-9]+]] = f32[4]{0} get-tuple-element([[T]]), index=1
  CHECK-NEXT:   [[M:[a-z.0-9]+]] = f32[4]{0} multiply([[X]], [[X]])
  CHECK-NEXT:   [[T2:[a-z.0-9]+]] = (s32[], f32[4]{0}) tuple({{[a-z.0-9]+}}, [[M]])
  CHECK-NEXT:   ROOT {{[a-z.0-9]+}} = f32[4]{0} get-tuple-element([[T2]]), index=1
  CHECK-NOT:  while(
  """)


def test_loops_of_several_trips_are_kept():
  _check(_counted_loop(0, 2, 1), None)


def test_side_effecting_condition_blocks_removal():
  text = _counted_loop(0, 0, 1, cond_effect="""
  tok = token[] after-all()
  of = token[] outfeed(n, tok), outfeed_shape=s32[]""")
  _check(text, None)


_DEAD = """HloModule m

cond {
  p = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  y = f32[4] get-tuple-element(p), index=2
  d = f32[4] get-tuple-element(p), index=3
  d2 = f32[4] add(d, y)
  x2 = f32[4] add(x, y)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[4], f32[4], f32[4]) tuple(i2, x2, y, d2)
}

ENTRY e {
  i0 = s32[] parameter(0)
  a = f32[4] parameter(1)
  b = f32[4] parameter(2)
  c = f32[4] parameter(3)
  t = (s32[], f32[4], f32[4], f32[4]) tuple(i0, a, b, c)
  w = (s32[], f32[4], f32[4], f32[4]) while(t), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""


def test_dead_carry_element_is_removed():
  # Element 3 (d) only feeds itself and nobody outside reads it; element 2
  # (y) is not read outside but feeds x2, element 0 drives the condition.
  _check(_DEAD, """
  CHECK:      body {
  CHECK-NOT:    d2
  CHECK:        ROOT {{[a-z.0-9]+}} = (s32[], f32[4]{0}, f32[4]{0}) tuple({{[a-z.0-9]+}}, x2, {{[a-z.0-9]+}})
  CHECK-NEXT: }
  CHECK:      ENTRY e {
  CHECK:        [[T:[a-z.0-9]+]] = (s32[], f32[4]{0}, f32[4]{0}) tuple(i0, a, b)
  CHECK-NEXT:   [[W:while[.0-9]*]] = (s32[], f32[4]{0}, f32[4]{0}) while([[T]]), condition=cond, body=body
  CHECK-NEXT:   ROOT r = f32[4]{0} get-tuple-element([[W]]), index=1
  """)


def test_dead_element_read_outside_is_kept():
  text = _DEAD.replace(
      "ROOT r = f32[4] get-tuple-element(w), index=1",
      "r1 = f32[4] get-tuple-element(w), index=1\n"
      "  r3 = f32[4] get-tuple-element(w), index=3\n"
      "  ROOT r = f32[4] add(r1, r3)")
  _check(text, None)


def test_element_feeding_side_effect_is_kept():
  text = _DEAD.replace(
      "  x2 = f32[4] add(x, y)",
      "  x2 = f32[4] add(x, y)\n  tok = token[] after-all()\n"
      "  of = token[] outfeed(d, tok), outfeed_shape=f32[4]")
  _check(text, None)


def test_loop_used_whole_is_kept():
  text = _DEAD.replace("ROOT r = f32[4] get-tuple-element(w), index=1",
                       "ROOT r = ((s32[], f32[4], f32[4], f32[4])) tuple(w)")
  _check(text, None)


def test_shared_body_is_not_narrowed():
  # Two loops share cond and body: narrowing one would break the other.
  text = _DEAD.replace(
      "  ROOT r = f32[4] get-tuple-element(w), index=1",
      "  w2 = (s32[], f32[4], f32[4], f32[4]) while(t), condition=cond, "
      "body=body\n"
      "  r1 = f32[4] get-tuple-element(w), index=1\n"
      "  r2 = f32[4] get-tuple-element(w2), index=1\n"
      "  ROOT r = f32[4] add(r1, r2)")
  _check(text, None)
