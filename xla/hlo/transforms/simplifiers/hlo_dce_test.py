"""Tests for HloDCE: dead pure instructions and unreachable computations
go; parameters, roots and side-effecting instructions stay."""

import pytest

from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import hlo_dce
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _check(text, expected, **kwargs):
  """Runs DCE on `text`; FileChecks the result against `expected` (None:
  nothing may change)."""
  return run_and_filecheck(text, hlo_dce.HloDCE(**kwargs), expected)


def _names(module, comp=None):
  comp = comp or module.entry_computation
  return sorted(i.name for i in comp.instructions)


def test_removes_dead_chain():
  # The unused parameter q is kept.
  _check("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  dead1 = f32[4] exponential(p)
  dead2 = f32[4] add(dead1, q)
  ROOT r = f32[4] negate(p)
}""", """
  CHECK:      ENTRY e {
  CHECK-NEXT:   p = f32[4]{0} parameter(0)
  CHECK-NEXT:   q = f32[4]{0} parameter(1)
  CHECK-NEXT:   ROOT r = f32[4]{0} negate(p)
  CHECK-NEXT: }""")


def test_nothing_dead_is_unchanged():
  text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT r = f32[4] add(n, p)
}"""
  _check(text, None)


@pytest.mark.parametrize("instrs,kept", [
    ("t = token[] after-all()\n  o = token[] outfeed(p, t)", ["o", "t"]),
    ("t = token[] after-all()\n  i = (f32[4], token[]) infeed(t)",
     ["i", "t"]),
    ("t = token[] after-all()\n"
     "  s = (f32[4], u32[], token[]) send(p, t), channel_id=1\n"
     "  sd = token[] send-done(s), channel_id=1", ["s", "sd", "t"]),
    ("t = token[] after-all()\n"
     "  r2 = (f32[4], u32[], token[]) recv(t), channel_id=2\n"
     "  rd = (f32[4], token[]) recv-done(r2), channel_id=2",
     ["r2", "rd", "t"]),
    ("c = f32[4] custom-call(p), custom_call_target=\"log\", "
     "custom_call_has_side_effect=true", ["c"]),
    ("z = f32[] constant(0)\n  o = f32[] constant(1)\n"
     "  rn = f32[4] rng(z, o), distribution=rng_uniform", ["o", "rn", "z"]),
])
def test_keeps_side_effecting(instrs, kept):
  text = f"""HloModule m
ENTRY e {{
  p = f32[4] parameter(0)
  {instrs}
  dead = f32[4] exponential(p)
  ROOT r = f32[4] negate(p)
}}"""
  _, m = _check(text, "CHECK-NOT: dead =")
  assert _names(m) == sorted(kept + ["p", "r"])


def test_keeps_collective():
  _check("""HloModule m
sum {
  x = f32[] parameter(0)  y = f32[] parameter(1)
  ROOT a = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  ar = f32[4] all-reduce(p), to_apply=sum
  ROOT r = f32[4] negate(p)
}""", None)


def test_custom_call_without_side_effect_is_removed():
  _check("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] custom-call(p), custom_call_target="pure"
  ROOT r = f32[4] negate(p)
}""", """
  CHECK:      ENTRY e {
  CHECK-NEXT:   p = f32[4]{0} parameter(0)
  CHECK-NEXT:   ROOT r = f32[4]{0} negate(p)
  CHECK-NEXT: }""")


def test_keeps_call_to_side_effecting_computation():
  text = """HloModule m
effect {
  x = f32[4] parameter(0)
  t = token[] after-all()
  o = token[] outfeed(x, t)
  ROOT y = f32[4] negate(x)
}
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] call(p), to_apply=effect
  ROOT r = f32[4] negate(p)
}"""
  _check(text, None)


def test_removes_dead_call_and_its_computation():
  _, m = _check("""HloModule m
pure {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] call(p), to_apply=pure
  ROOT r = f32[4] negate(p)
}""", """
  CHECK-NOT:  pure
  CHECK:      ENTRY e {
  CHECK-NEXT:   p = f32[4]{0} parameter(0)
  CHECK-NEXT:   ROOT r = f32[4]{0} negate(p)
  CHECK-NEXT: }""")
  assert [c.name for c in m.computations] == ["e"]


def test_keeps_dead_computation_when_disabled():
  _check("""HloModule m
unused {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
ENTRY e {
  ROOT p = f32[] parameter(0)
}""", None, remove_dead_computations=False)


def test_removes_unreachable_computations_transitively():
  _, m = _check("""HloModule m
leaf {
  a = f32[] parameter(0)  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
mid {
  v = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(v, z), dimensions={0}, to_apply=leaf
}
ENTRY e {
  ROOT p = f32[] parameter(0)
}""", "CHECK-NOT: leaf\nCHECK-NOT: mid\nCHECK: ENTRY e {")
  assert [c.name for c in m.computations] == ["e"]


def test_used_computation_stays():
  _check("""HloModule m
add {
  a = f32[] parameter(0)  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  v = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(v, z), dimensions={0}, to_apply=add
}""", None)


def test_dead_code_inside_called_computation():
  _check("""HloModule m
body {
  x = f32[4] parameter(0)
  junk = f32[4] exponential(x)
  ROOT y = f32[4] negate(x)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] call(p), to_apply=body
}""", """
  CHECK:      body {
  CHECK-NEXT:   x = f32[4]{0} parameter(0)
  CHECK-NEXT:   ROOT y = f32[4]{0} negate(x)
  CHECK-NEXT: }""")


def test_control_dependencies_are_bridged():
  _check("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  dead = f32[4] exponential(p), control-predecessors={a}
  b = f32[4] sine(p), control-predecessors={dead}
  ROOT r = (f32[4], f32[4]) tuple(a, b)
}""", """
  CHECK-NOT: dead
  CHECK:     b = f32[4]{0} sine(p), control-predecessors={a}{{$}}
  CHECK-NOT: dead""")


def test_other_execution_threads_are_left_alone():
  module = hp.parse_and_return_verified_module("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  dead = f32[4] exponential(p)
  ROOT r = f32[4] negate(p)
}""")
  module.entry_computation.execution_thread = "main"
  assert not hlo_dce.HloDCE().run(module, frozenset({"other"}))
  assert hlo_dce.HloDCE().run(module, frozenset({"main"}))


def test_has_side_effect_recursive():
  m = hp.parse_and_return_verified_module("""HloModule m
inner {
  x = f32[4] parameter(0)
  t = token[] after-all()
  o = token[] outfeed(x, t)
  ROOT y = f32[4] negate(x)
}
outer {
  x = f32[4] parameter(0)
  ROOT c = f32[4] call(x), to_apply=inner
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] call(p), to_apply=outer
}""")
  root = m.entry_computation.root_instruction
  assert not root.has_side_effect()
  assert hlo_dce.has_side_effect_recursive(root)
