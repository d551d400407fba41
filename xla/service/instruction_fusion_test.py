"""Tests for the InstructionFusion base: legality rules, duplication of
cheap producers only, fusion structure and printing."""

from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.service import hlo_verifier
from xla.service import instruction_fusion as inf

O = HloOpcode


def _run(text, **kwargs):
  module = hp.parse_and_return_verified_module(text)
  changed = inf.InstructionFusion(**kwargs).run(module)
  hlo_verifier.verify(module)
  # The printed form (fusions with calls=) parses back to the same text.
  again = hp.parse_and_return_verified_module(module.to_string())
  assert again.to_string() == module.to_string()
  return changed, module


def _opcodes(comp):
  return sorted(i.opcode.value for i in comp.instructions)


def _fusions(comp):
  return [i for i in comp.instructions if i.opcode == O.kFusion]


def test_chain_becomes_one_loop_fusion():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  a = f32[8] add(p, q)
  n = f32[8] negate(a)
  ROOT s = f32[8] multiply(n, p)
}""")
  assert changed
  entry = m.entry_computation
  assert _opcodes(entry) == ["fusion", "parameter", "parameter"]
  (fusion,) = _fusions(entry)
  assert entry.root_instruction is fusion
  assert fusion.fusion_kind == FusionKind.kLoop
  assert [o.name for o in fusion.operands] == ["p", "q"]
  fused = fusion.fused_computation
  assert _opcodes(fused) == ["add", "multiply", "negate", "parameter",
                             "parameter"]
  assert fused.root_instruction.opcode == O.kMultiply
  assert "calls=" in m.to_string()
  # The shared parameter p is one fusion parameter used twice.
  p_param = fused.parameter_instruction(0)
  assert sorted(u.opcode.value for u in p_param.users) == ["add",
                                                            "multiply"]


def test_only_parameters_and_tuple_is_unchanged():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  ROOT t = (f32[8], f32[8]) tuple(p, q)
}""")
  assert not changed
  assert not _fusions(m.entry_computation)


def test_side_effecting_ops_are_not_fused():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  c = f32[8] custom-call(p), custom_call_target="log", custom_call_has_side_effect=true
  ROOT n = f32[8] negate(c)
}""")
  assert not changed
  assert _opcodes(m.entry_computation) == ["custom-call", "negate",
                                           "parameter"]


def test_outfeed_consumer_is_not_fused():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  n = f32[8] negate(p)
  t = token[] after-all()
  ROOT o = token[] outfeed(n, t)
}""")
  assert not changed


def test_expensive_producer_with_two_users_is_not_duplicated():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  x = f32[8] exponential(p)
  a = f32[8] negate(x)
  b = f32[8] abs(x)
  ROOT t = (f32[8], f32[8]) tuple(a, b)
}""")
  assert not changed
  assert _opcodes(m.entry_computation).count("exponential") == 1


def test_cheap_producer_with_two_users_is_duplicated():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[] parameter(0)
  q = f32[8] parameter(1)
  b = f32[8] broadcast(p), dimensions={}
  x = f32[8] add(b, q)
  y = f32[8] subtract(q, b)
  ROOT t = (f32[8], f32[8]) tuple(x, y)
}""")
  assert changed
  entry = m.entry_computation
  fusions = _fusions(entry)
  assert len(fusions) == 2
  # The broadcast is recomputed inside each fusion and gone from the entry.
  assert "broadcast" not in _opcodes(entry)
  for f in fusions:
    assert "broadcast" in _opcodes(f.fused_computation)


def test_no_duplication_when_disabled():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[] parameter(0)
  q = f32[8] parameter(1)
  b = f32[8] broadcast(p), dimensions={}
  x = f32[8] add(b, q)
  y = f32[8] subtract(q, b)
  ROOT t = (f32[8], f32[8]) tuple(x, y)
}""", may_duplicate=False)
  assert not changed


def test_nothing_crosses_a_while_and_body_is_fused_alone():
  changed, m = _run("""HloModule m
cond {
  c = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  k = s32[] constant(3)
  ROOT lt = pred[] compare(i, k), direction=LT
}
body {
  b = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  v = f32[4] get-tuple-element(b), index=1
  v2 = f32[4] negate(v)
  v3 = f32[4] abs(v2)
  ROOT r = (s32[], f32[4]) tuple(i2, v3)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = s32[] constant(0)
  n = f32[4] negate(p)
  init = (s32[], f32[4]) tuple(z, n)
  ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body
}""")
  assert changed
  entry = m.entry_computation
  # Entry: nothing fusible (negate feeds a tuple, which is never fused).
  assert not _fusions(entry)
  assert "negate" in _opcodes(entry)
  body = m.get_computation_with_name("body")
  fusions = _fusions(body)
  assert {f.fused_computation.root_instruction.opcode for f in fusions} == {
      O.kAdd, O.kAbs}
  # No fusion contains a while, a tuple or a get-tuple-element.
  for comp in m.computations:
    if comp.is_fusion_computation():
      ops = set(_opcodes(comp))
      assert not ops & {"while", "tuple", "get-tuple-element"}


def test_control_dependencies_block_fusion():
  module = hp.parse_and_return_verified_module("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] negate(p)
  b = f32[8] abs(p)
  ROOT c = f32[8] add(a, b), control-predecessors={b}
}""")
  changed = inf.InstructionFusion().run(module)
  hlo_verifier.verify(module)
  assert not changed


def test_reducer_computation_is_not_fused_into():
  changed, m = _run("""HloModule m
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  ROOT n = f32[] negate(s)
}
ENTRY e {
  p = f32[4,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f
}""")
  reducer = m.get_computation_with_name("add_f")
  assert reducer is not None and not _fusions(reducer)


def test_is_expensive_table():
  m = hp.parse_and_return_verified_module("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] add(p, p)
  x = f32[8] exponential(p)
  d = f32[8] divide(p, p)
  r = f32[2,4] reshape(p)
  b = f32[2,8] broadcast(p), dimensions={1}
  ROOT t = (f32[8], f32[8], f32[8], f32[2,4], f32[2,8]) tuple(a, x, d, r, b)
}""")
  by_name = {i.name: i for i in m.entry_computation.instructions}
  assert not inf.is_expensive(by_name["a"])
  assert inf.is_expensive(by_name["x"])
  assert inf.is_expensive(by_name["d"])
  assert not inf.is_expensive(by_name["r"])
  assert not inf.is_expensive(by_name["b"])


def test_fuse_group_keeps_other_users_of_duplicated_producer():
  m = hp.parse_and_return_verified_module("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] negate(p)
  b = f32[8] abs(a)
  ROOT t = (f32[8], f32[8]) tuple(a, b)
}""")
  entry = m.entry_computation
  by_name = {i.name: i for i in entry.instructions}
  fusion = inf.fuse_group([by_name["a"], by_name["b"]], [by_name["b"]],
                          FusionKind.kLoop)
  hlo_verifier.verify(m)
  assert by_name["a"].parent is entry  # still used by the tuple
  assert entry.root_instruction.operands == (by_name["a"], fusion)
  assert inf.count_fusions(entry) == 1
  assert inf.count_fusions(entry, FusionKind.kInput) == 0


def test_long_chain_fuses_incrementally_into_one_fusion():
  # Each producer is cloned into the growing fusion in place (the fusion
  # used to be rebuilt from scratch per producer: quadratic, ~2 minutes on
  # a testdata rng program). The result must still be one fusion with one
  # fused computation, the chain inside it, and the right inputs.
  n = 300
  lines = ["HloModule m", "ENTRY e {", "  p = f32[4] parameter(0)",
           "  q = f32[4] parameter(1)", "  v0 = f32[4] add(p, q)"]
  for i in range(1, n):
    op = ("negate(v{})".format(i - 1) if i % 3 == 0 else
          "multiply(v{}, {})".format(i - 1, "p" if i % 2 else "q"))
    lines.append(f"  v{i} = f32[4] {op}")
  lines.append(f"  ROOT r = f32[4] add(v{n - 1}, p)")
  lines.append("}")
  text = "\n".join(lines)
  from xla.hlo.evaluator import hlo_evaluator  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  args = [np.array([1, -1, 0.5, 2], np.float32),
          np.array([0.9, 1.1, -1, 1], np.float32)]
  want = hlo_evaluator.HloEvaluator().evaluate(
      hp.parse_and_return_verified_module(text), args)
  changed, m = _run(text)
  assert changed
  entry = m.entry_computation
  assert _opcodes(entry) == ["fusion", "parameter", "parameter"]
  (fusion,) = _fusions(entry)
  assert [o.name for o in fusion.operands] == ["p", "q"]
  assert len(m.computations) == 2  # entry + one fused computation
  fused = fusion.fused_computation
  assert fused.fusion_instruction is fusion
  assert fused.instruction_count == n + 1 + 2  # chain, root add, 2 params
  got = hlo_evaluator.HloEvaluator().evaluate(m, args)
  np.testing.assert_array_equal(got[0], want[0])


def test_fusing_into_a_fusion_reuses_and_renumbers_parameters():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  a = f32[8] add(p, q)
  b = f32[8] subtract(q, p)
  c = f32[8] multiply(a, b)
  ROOT s = f32[8] negate(c)
}""")
  assert changed
  (fusion,) = _fusions(m.entry_computation)
  fused = fusion.fused_computation
  # Two inputs in all, each one parameter, numbered as the operands.
  assert sorted(o.name for o in fusion.operands) == ["p", "q"]
  assert fused.num_parameters == 2
  for i, op in enumerate(fusion.operands):
    param = fused.parameter_instruction(i)
    assert param.parameter_number == i and param.shape == op.shape
  assert _opcodes(fused) == ["add", "multiply", "negate", "parameter",
                             "parameter", "subtract"]


def test_applied_functions_match_is_applied_function():
  m = hp.parse_and_return_verified_module("""HloModule m
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
cond {
  t = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  t = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  x = f32[4] get-tuple-element(t), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  z = f32[] constant(0)
  r = f32[] reduce(x, z), dimensions={0}, to_apply=max_f
  b = f32[4] broadcast(r), dimensions={}
  ROOT o = (s32[], f32[4]) tuple(j, b)
}
called {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
ENTRY e {
  p = f32[4,8] parameter(0)
  z = f32[] constant(0)
  r = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f
  c = f32[4] call(r), to_apply=called
  i = s32[] constant(0)
  t = (s32[], f32[4]) tuple(i, c)
  ROOT w = (s32[], f32[4]) while(t), condition=cond, body=body
}""")
  names = {m.get_computation_with_name(n)
           for n in ("add_f", "max_f")}
  want = {id(c) for c in m.computations if c in names}
  assert inf.applied_functions(m) == want
  for c in m.computations:
    assert inf.is_applied_function(m, c) == (id(c) in want), c.name


def _diamond_chain(n):
  """x_{k+1} = x_k ^ (x_k << 3): every x_k has two users, the xor and the
  shift of the next step (a hash round's shape)."""
  lines = ["HloModule m", "ENTRY e {", "  x0 = u32[8] parameter(0)",
           "  c = u32[] constant(3)", "  s = u32[8] broadcast(c), dimensions={}"]
  for k in range(n):
    lines.append(f"  l{k} = u32[8] shift-left(x{k}, s)")
    lines.append(f"  x{k + 1} = u32[8] xor(x{k}, l{k})")
  lines[-1] = lines[-1].replace(f"  x{n} =", f"  ROOT x{n} =")
  lines.append("}")
  return "\n".join(lines)


def test_shared_producers_fuse_once_not_per_user():
  # Operands later in post order fuse first, so x_k joins the fusion after
  # both its users and is not duplicated; fusing x_k first would copy it
  # once per user at every step (2^n instructions).
  n = 12
  _, m = _run(_diamond_chain(n))
  (fusion,) = _fusions(m.entry_computation)
  fused = fusion.fused_computation
  counts = {}
  for i in fused.instructions:
    counts[i.opcode.value] = counts.get(i.opcode.value, 0) + 1
  assert counts["xor"] == n and counts["shift-left"] == n, counts
  assert len(list(fused.instructions)) == 2 * n + 3, counts


def test_fusing_into_a_fusion_updates_it_in_place():
  # Growing a fusion keeps the instruction (as XLA's FuseInstruction), so
  # a long chain costs one clone per producer, not a new fusion each time;
  # its operands and their users follow.
  module = hp.parse_and_return_verified_module("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  a = f32[8] add(p, q)
  n = f32[8] negate(a)
  ROOT s = f32[8] multiply(n, p)
}""")
  entry = module.entry_computation
  root = entry.root_instruction
  neg = root.operand(0)
  fusion = inf.fuse_group([neg, root], [root], FusionKind.kLoop)
  grown = inf.fuse_into_fusion(fusion.operand(0), fusion, FusionKind.kLoop)
  assert grown is fusion and entry.root_instruction is fusion
  assert [o.name for o in fusion.operands] == ["p", "q"]
  p, q = fusion.operands
  assert p.users == (fusion,) and q.users == (fusion,)
  assert _opcodes(fusion.fused_computation) == [
      "add", "multiply", "negate", "parameter", "parameter"]
  hlo_verifier.verify(module)
