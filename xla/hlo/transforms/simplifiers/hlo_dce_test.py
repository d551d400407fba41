"""Tests for HloDCE: dead pure instructions and unreachable computations
go; parameters, roots and side-effecting instructions stay."""

import pytest

from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import hlo_dce
from xla.service import hlo_verifier


def _run(text, **kwargs):
  module = hp.parse_and_return_verified_module(text)
  changed = hlo_dce.HloDCE(**kwargs).run(module)
  hlo_verifier.verify(module)
  return changed, module


def _names(module, comp=None):
  comp = comp or module.entry_computation
  return sorted(i.name for i in comp.instructions)


def test_removes_dead_chain():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  dead1 = f32[4] exponential(p)
  dead2 = f32[4] add(dead1, q)
  ROOT r = f32[4] negate(p)
}""")
  assert changed
  assert _names(m) == ["p", "q", "r"]  # unused parameter q is kept


def test_nothing_dead_is_unchanged():
  text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT r = f32[4] add(n, p)
}"""
  changed, m = _run(text)
  assert not changed
  assert m.to_string() == hp.parse_and_return_verified_module(text).to_string()


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
  changed, m = _run(text)
  assert changed  # `dead` goes
  assert _names(m) == sorted(kept + ["p", "r"])


def test_keeps_collective():
  changed, m = _run("""HloModule m
sum {
  x = f32[] parameter(0)  y = f32[] parameter(1)
  ROOT a = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  ar = f32[4] all-reduce(p), to_apply=sum
  ROOT r = f32[4] negate(p)
}""")
  assert not changed
  assert _names(m) == ["ar", "p", "r"]
  assert m.computation_count == 2


def test_custom_call_without_side_effect_is_removed():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] custom-call(p), custom_call_target="pure"
  ROOT r = f32[4] negate(p)
}""")
  assert changed
  assert _names(m) == ["p", "r"]


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
  changed, m = _run(text)
  assert not changed
  assert m.computation_count == 2
  assert "c" in _names(m)


def test_removes_dead_call_and_its_computation():
  changed, m = _run("""HloModule m
pure {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] call(p), to_apply=pure
  ROOT r = f32[4] negate(p)
}""")
  assert changed
  assert _names(m) == ["p", "r"]
  assert [c.name for c in m.computations] == ["e"]


def test_keeps_dead_computation_when_disabled():
  changed, m = _run("""HloModule m
unused {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
ENTRY e {
  ROOT p = f32[] parameter(0)
}""", remove_dead_computations=False)
  assert not changed
  assert m.computation_count == 2


def test_removes_unreachable_computations_transitively():
  changed, m = _run("""HloModule m
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
}""")
  assert changed
  assert [c.name for c in m.computations] == ["e"]


def test_used_computation_stays():
  changed, m = _run("""HloModule m
add {
  a = f32[] parameter(0)  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  v = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(v, z), dimensions={0}, to_apply=add
}""")
  assert not changed
  assert m.computation_count == 2


def test_dead_code_inside_called_computation():
  changed, m = _run("""HloModule m
body {
  x = f32[4] parameter(0)
  junk = f32[4] exponential(x)
  ROOT y = f32[4] negate(x)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] call(p), to_apply=body
}""")
  assert changed
  assert _names(m, m.get_computation_with_name("body")) == ["x", "y"]


def test_control_dependencies_are_bridged():
  module = hp.parse_and_return_verified_module("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  dead = f32[4] exponential(p), control-predecessors={a}
  b = f32[4] sine(p), control-predecessors={dead}
  ROOT r = (f32[4], f32[4]) tuple(a, b)
}""")
  assert hlo_dce.HloDCE().run(module)
  comp = module.entry_computation
  a = comp.get_instruction_with_name("a")
  b = comp.get_instruction_with_name("b")
  assert comp.get_instruction_with_name("dead") is None
  assert b.control_predecessors == [a]
  hlo_verifier.verify(module)


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
