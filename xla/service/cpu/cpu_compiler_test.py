"""End-to-end tests of the CPU compiler and runtime: control flow, custom
calls, donation, in-place updates, the pass pipeline, errors."""

import numpy as np
import pytest

import support
from xla.hlo.evaluator.hlo_evaluator import HloEvaluator
from xla.hlo.parser import hlo_parser
from xla.service.cpu import cpu_compiler
from xla.service.cpu import cpu_testing as ct

_COUNTER_COND = """
cond {{
  p = {shape} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({n})
  ROOT lt = pred[] compare(i, n), direction=LT
}}
"""


def _while_module(shape: str, n: int, body: str, entry: str) -> str:
  return ("HloModule m\n" + _COUNTER_COND.format(shape=shape, n=n) + body +
          entry)


WHILE_SWAP = _while_module("(s32[], f32[4], f32[4])", 5, """
body {
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  a = f32[4] get-tuple-element(p), index=1
  b = f32[4] get-tuple-element(p), index=2
  c = f32[4] add(a, b)
  ROOT t = (s32[], f32[4], f32[4]) tuple(i1, b, c)
}
""", """
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = s32[] constant(0)
  t = (s32[], f32[4], f32[4]) tuple(z, x, y)
  ROOT w = (s32[], f32[4], f32[4]) while(t), condition=cond, body=body
}""")

WHILE_DUS = _while_module("(s32[], f32[10,3])", 10, """
body {
  p = (s32[], f32[10,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  a = f32[10,3] get-tuple-element(p), index=1
  f = f32[] convert(i)
  u = f32[1,3] broadcast(f), dimensions={}
  z = s32[] constant(0)
  d = f32[10,3] dynamic-update-slice(a, u, i, z)
  ROOT t = (s32[], f32[10,3]) tuple(i1, d)
}
""", """
ENTRY e {
  x = f32[10,3] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[10,3]) tuple(z, x)
  ROOT w = (s32[], f32[10,3]) while(t), condition=cond, body=body
}""")

WHILE_READS_AFTER = _while_module("(s32[], f32[4], f32[4])", 4, """
body {
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  a = f32[4] get-tuple-element(p), index=1
  b = f32[4] get-tuple-element(p), index=2
  ra = f32[4] reverse(a), dimensions={0}
  c = f32[4] multiply(ra, b)
  d = f32[4] add(a, c)
  ROOT t = (s32[], f32[4], f32[4]) tuple(i1, ra, d)
}
""", """
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = s32[] constant(0)
  t = (s32[], f32[4], f32[4]) tuple(z, x, y)
  ROOT w = (s32[], f32[4], f32[4]) while(t), condition=cond, body=body
}""")

WHILE_CONST_DUP = _while_module("(s32[], f32[4], f32[4])", 3, """
body {
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  a = f32[4] get-tuple-element(p), index=1
  b = f32[4] get-tuple-element(p), index=2
  k = f32[4] constant({1,2,3,4})
  s = f32[4] add(a, b)
  ROOT t = (s32[], f32[4], f32[4]) tuple(i1, s, k)
}
""", """
ENTRY e {
  x = f32[4] parameter(0)
  e = f32[4] exponential(x)
  z = s32[] constant(0)
  t = (s32[], f32[4], f32[4]) tuple(z, e, e)
  w = (s32[], f32[4], f32[4]) while(t), condition=cond, body=body
  w1 = f32[4] get-tuple-element(w), index=1
  ROOT r = f32[4] add(w1, e)
}""")

NESTED_WHILE = """
HloModule m
icond {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ibody {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x = f32[3] get-tuple-element(p), index=1
  h = f32[] constant(0.5)
  hb = f32[3] broadcast(h), dimensions={}
  y = f32[3] multiply(x, hb)
  ROOT t = (s32[], f32[3]) tuple(i1, y)
}
ocond {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
obody {
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x = f32[3] get-tuple-element(p), index=1
  z = s32[] constant(0)
  it = (s32[], f32[3]) tuple(z, x)
  w = (s32[], f32[3]) while(it), condition=icond, body=ibody
  wx = f32[3] get-tuple-element(w), index=1
  s = f32[3] add(wx, x)
  ROOT t = (s32[], f32[3]) tuple(i1, s)
}
ENTRY e {
  x = f32[3] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[3]) tuple(z, x)
  w1 = (s32[], f32[3]) while(t), condition=ocond, body=obody
  w2 = (s32[], f32[3]) while(t), condition=ocond, body=obody
  a = f32[3] get-tuple-element(w1), index=1
  b = f32[3] get-tuple-element(w2), index=1
  ROOT r = f32[3] subtract(a, b)
}"""


@pytest.mark.parametrize("text", [WHILE_SWAP, WHILE_DUS, WHILE_READS_AFTER,
                                  WHILE_CONST_DUP, NESTED_WHILE],
                         ids=["swap", "dus", "reads_after", "const_dup",
                              "nested_shared"])
def test_while_loops(text):
  ct.run_and_compare(text)


def test_while_dus_is_in_place():
  exe, _ = ct.run_and_compare(WHILE_DUS)
  kinds = ct.flat_kinds(exe.plan["thunks"])
  (loop,) = [t for t in exe.plan["thunks"] if t["kind"] == "while"]
  body = ct.flat_kinds(loop["body"])
  assert "copy" not in body, body
  assert kinds.count("while") == 1


def test_while_swap_copies_through_temporaries():
  exe, (i, a, b) = ct.run_and_compare(WHILE_SWAP, [
      np.ones(4, np.float32), np.full(4, 2, np.float32)])
  assert i == 5
  (loop,) = [t for t in exe.plan["thunks"] if t["kind"] == "while"]
  assert "copy" in ct.flat_kinds(loop["body"])


CONDITIONAL = """
HloModule m
b0 {
  p = (f32[4], f32[4]) parameter(0)
  ROOT a = f32[4] get-tuple-element(p), index=0
}
b1 {
  p = (f32[4], f32[4]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = f32[4] get-tuple-element(p), index=1
  ROOT c = f32[4] multiply(a, b)
}
b2 {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[4] parameter(1)
  y = f32[4] parameter(2)
  t = (f32[4], f32[4]) tuple(x, y)
  c = f32[4] conditional(k, t, t, x), branch_computations={b0, b1, b2}
  ROOT r = (f32[4], f32[4]) tuple(c, x)
}"""


@pytest.mark.parametrize("index", [0, 1, 2, 7, -1])
def test_conditional_index(index):
  x = np.arange(4, dtype=np.float32)
  _, (c, xo) = ct.run_and_compare(CONDITIONAL, [np.int32(index), x, x + 2])
  np.testing.assert_array_equal(xo, x)  # the operand is not clobbered


def test_conditional_pred():
  text = """
HloModule m
t {
  p = f32[5] parameter(0)
  ROOT e = f32[5] exponential(p)
}
f {
  p = f32[5] parameter(0)
  ROOT e = f32[5] copy(p)
}
ENTRY e {
  c = pred[] parameter(0)
  x = f32[5] parameter(1)
  ROOT r = f32[5] conditional(c, x, x), true_computation=t, false_computation=f
}"""
  x = np.linspace(0, 1, 5).astype(np.float32)
  ct.run_and_compare(text, [np.bool_(True), x])
  ct.run_and_compare(text, [np.bool_(False), x])


def test_call_is_inlined():
  text = """
HloModule m
sq {
  p = f32[6] parameter(0)
  ROOT m = f32[6] multiply(p, p)
}
ENTRY e {
  x = f32[6] parameter(0)
  c = f32[6] call(x), to_apply=sq
  d = f32[6] call(c), to_apply=sq
  ROOT r = (f32[6], f32[6]) tuple(c, d)
}"""
  exe, _ = ct.run_and_compare(text)
  assert "call(" not in exe.module.to_string()


CUSTOM = """
HloModule m
ENTRY e {
  x = f32[3,2] parameter(0)
  y = s32[4] parameter(1)
  c = (f32[2,3], s32[]) custom-call(x, y), custom_call_target="my_op", backend_config="cfg"
  t = f32[2,3] get-tuple-element(c), index=0
  s = s32[] get-tuple-element(c), index=1
  e = f32[2,3] exponential(t)
  ROOT r = (f32[2,3], s32[]) tuple(e, s)
}"""


def _my_op(instr, operands):
  x, y = operands
  assert instr.custom_call_target == "my_op"
  assert instr.backend_config == "cfg"
  return (x.T * 2, np.int32(y.sum()))


def test_custom_call():
  x = np.arange(6, dtype=np.float32).reshape(3, 2)
  y = np.array([1, 2, 3, 4], np.int32)
  _, (e, s) = ct.run_and_compare(CUSTOM, [x, y],
                                 custom_calls={"my_op": _my_op})
  assert s == 10
  np.testing.assert_allclose(e, np.exp(x.T * 2), rtol=1e-6)
  _, exe = ct.compile_text(CUSTOM)
  flags = []
  exe.execute([x, y], custom_calls={"my_op": lambda i, ops: (
      flags.extend(o.flags.writeable for o in ops) or _my_op(i, ops))})
  assert flags == [False, False]  # operands are read-only views


def test_compiled_custom_calls_do_not_keep_the_module_alive():
  # The executable and the compilation cache keep the custom-call
  # instructions; holding the optimised module's own would keep all of it
  # alive (walked by every later full garbage collection).
  import gc  # pylint: disable=g-import-not-at-top
  import weakref  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import compilation_cache  # pylint: disable=g-import-not-at-top
  compilation_cache.CACHE.clear()  # a compile, not a cache hit
  _, exe = ct.compile_text(CUSTOM)
  module = weakref.ref(exe.module)
  x = np.arange(6, dtype=np.float32).reshape(3, 2)
  y = np.array([1, 2, 3, 4], np.int32)
  exe.module = None
  gc.collect()
  assert module() is None
  _, s = exe.execute([x, y], custom_calls={"my_op": _my_op})
  assert s == 10


def test_custom_call_unknown_target():
  _, exe = ct.compile_text(CUSTOM)
  with pytest.raises(support.UnimplementedError, match="my_op"):
    exe.execute([np.zeros((3, 2), np.float32), np.zeros(4, np.int32)])


def test_custom_call_returning_none_zeroes_result():
  text = """
HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  ROOT c = f32[3] custom-call(x), custom_call_target="noop"
}"""
  seen = []
  _, exe = ct.compile_text(text)
  (out,) = exe.execute([np.ones(3, np.float32)],
                       custom_calls={"noop": lambda i, ops: seen.append(1)})
  np.testing.assert_array_equal(out, np.zeros(3, np.float32))
  assert seen == [1]


DUS_ALIAS = """
HloModule m, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  x = f32[1000] parameter(0)
  u = f32[10] parameter(1)
  i = s32[] parameter(2)
  ROOT d = f32[1000] dynamic-update-slice(x, u, i)
}"""


def test_donation_updates_in_place():
  _, exe = ct.compile_text(DUS_ALIAS)
  assert exe.plan["donation"] and exe.plan["donation"][0]["param"] == 0
  x = np.zeros(1000, np.float32)
  u = np.arange(10, dtype=np.float32)
  (out,) = exe.execute([x, u, np.int32(995)], donate=[0])
  assert np.shares_memory(out, x)
  np.testing.assert_array_equal(out[990:], np.r_[np.zeros(0), u])
  x2 = np.zeros(1000, np.float32)
  (out2,) = exe.execute([x2, u, np.int32(3)])  # not donated: x2 untouched
  assert not np.shares_memory(out2, x2) and not x2.any()
  np.testing.assert_array_equal(out2[3:13], u)


def test_donation_refused_when_parameter_read_later():
  text = """
HloModule m
ENTRY e {
  x = f32[64] parameter(0)
  r = f32[64] reverse(x), dimensions={0}
  ROOT a = f32[64] add(r, x)
}"""
  _, exe = ct.compile_text(text)
  x = np.arange(64, dtype=np.float32)
  (out,) = exe.execute([x], donate=[0])
  np.testing.assert_array_equal(out, x[::-1] + x)


def test_elementwise_donation_by_liveness():
  text = """
HloModule m
ENTRY e {
  x = f32[256] parameter(0)
  ROOT a = f32[256] exponential(x)
}"""
  _, exe = ct.compile_text(text)
  x = np.linspace(0, 1, 256).astype(np.float32)
  want = np.exp(x)
  (out,) = exe.execute([x], donate=[0])
  assert np.shares_memory(out, x)
  np.testing.assert_allclose(out, want, rtol=1e-6)


def test_outputs_are_fresh_per_execution():
  text = """
HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  k = f32[8] constant({1,2,3,4,5,6,7,8})
  a = f32[8] add(x, k)
  ROOT t = (f32[8], f32[8], f32[8], f32[8]) tuple(a, a, x, k)
}"""
  _, exe = ct.compile_text(text)
  x = np.ones(8, np.float32)
  r1 = exe.execute([x])
  r2 = exe.execute([x * 2])
  assert not np.shares_memory(r1[0], r2[0])
  assert not np.shares_memory(r1[0], r1[1])
  assert not np.shares_memory(r1[2], x)
  np.testing.assert_array_equal(r1[0], r1[1])
  np.testing.assert_array_equal(r1[3], np.arange(1, 9))
  np.testing.assert_array_equal(r2[0], 2 + np.arange(1, 9))


def test_argument_conversion_and_errors():
  text = """
HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  ROOT n = f32[2,3] negate(x)
}"""
  _, exe = ct.compile_text(text)
  x = np.arange(6, dtype=np.float64).reshape(3, 2).T  # wrong dtype, F order
  (out,) = exe.execute([x])
  np.testing.assert_array_equal(out, -x.astype(np.float32))
  with pytest.raises(support.InvalidArgumentError):
    exe.execute([np.zeros((3, 2), np.float32)])
  with pytest.raises(support.InvalidArgumentError):
    exe.execute([])


def test_tuple_parameter():
  text = """
HloModule m
ENTRY e {
  p = (f32[3], (s32[2], f32[3])) parameter(0)
  a = f32[3] get-tuple-element(p), index=0
  q = (s32[2], f32[3]) get-tuple-element(p), index=1
  b = f32[3] get-tuple-element(q), index=1
  ROOT s = f32[3] add(a, b)
}"""
  args = [(np.ones(3, np.float32), (np.zeros(2, np.int32),
                                    np.arange(3, dtype=np.float32)))]
  ct.run_and_compare(text, args)


def test_unimplemented_opcode_named_at_compile_time():
  text = """
HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  s = f32[3] parameter(1)
  ROOT b = f32[2,3] batch-norm-inference(x, s, s, s, s), epsilon=0.001, feature_index=1
}"""
  with pytest.raises(support.UnimplementedError,
                     match="opcode batch-norm-inference is not implemented"):
    ct.compile_text(text)


def test_threads_one_and_two_agree():
  text = """
HloModule m
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b) }
ENTRY e {
  x = f32[512,600] parameter(0)
  z = f32[] constant(0)
  l = f32[512,600] log-plus-one(x)
  r = f32[512] reduce(l, z), dimensions={1}, to_apply=add
  c = f32[600] reduce(l, z), dimensions={0}, to_apply=add
  ROOT t = (f32[512], f32[600], f32[512,600]) tuple(r, c, l)
}"""
  module = ct.parse(text)
  x = np.abs(ct.random_args(module)[0])
  outs = []
  for threads in (1, 2):
    exe = cpu_compiler.compile(
        module, cpu_compiler.CpuCompileOptions(threads=threads))
    outs.append(exe.execute([x]))
  for a, b in zip(*outs):
    np.testing.assert_array_equal(a, b)  # same kernels, same results
  want = HloEvaluator().evaluate(module, [x])
  ct.assert_same(outs[1], want, rtol=1e-4, atol=1e-3)


def test_compile_stats_and_memory():
  _, exe = ct.compile_text(WHILE_DUS)
  stats = exe.compile_stats
  for key in ("total", "cache"):
    assert key in stats
  assert exe.peak_memory_bytes >= exe.arena_bytes >= 0
  assert exe.arena_bytes % 64 == 0


def test_dump_to(tmp_path):
  ct.compile_text(WHILE_SWAP.replace("n = s32[] constant(5)",
                                     "n = s32[] constant(6)"),
                  dump_to=str(tmp_path))
  names = sorted(p.name for p in tmp_path.iterdir())
  assert any(n.endswith("optimized.hlo.txt") for n in names)
  assert any(n.endswith("ir.ll") for n in names)
  assert any(n.endswith("thunks.json") for n in names)


def test_disable_passes_skips_fusion():
  text = """
HloModule m
ENTRY e {
  x = f32[16] parameter(0)
  e = f32[16] exponential(x)
  ROOT n = f32[16] negate(e)
}"""
  module = ct.parse(text)
  exe = cpu_compiler.compile(module, cpu_compiler.CpuCompileOptions(
      disable_passes=("fusion",)))
  assert "fusion" not in exe.module.to_string()
  assert len([t for t in exe.plan["thunks"] if t["kind"] == "kernel"]) == 2
  ct.assert_same(exe.execute([np.ones(16, np.float32)]),
                 HloEvaluator().evaluate(module, [np.ones(16, np.float32)]))


def test_async_wrapped_computation_and_copy_start():
  text = """
HloModule m
wrapped {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  ROOT a = f32[8] add(p, q)
}
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  s = ((f32[8], f32[8]), f32[8], s32[]) async-start(x, y), calls=wrapped
  u = ((f32[8], f32[8]), f32[8], s32[]) async-update(s)
  d = f32[8] async-done(u)
  cs = (f32[8], f32[8], u32[]) copy-start(d)
  cd = f32[8] copy-done(cs)
  ROOT n = f32[8] negate(cd)
}"""
  exe, _ = ct.run_and_compare(text)
  assert "async" not in exe.module.to_string()


def test_physical_bitcasts_of_xla_optimized_hlo():
  # Bitcasts as XLA prints them after layout assignment: between layouts
  # (a physical transpose) and between element types of one width.
  text = """
HloModule m
ENTRY e {
  x = f32[2,3,4]{2,1,0} parameter(0)
  t = f32[4,2,3]{0,2,1} bitcast(x)
  c = f32[4,2,3]{2,1,0} copy(t)
  r = f32[8,3]{0,1} bitcast(x)
  rc = f32[8,3]{1,0} copy(r)
  i = s32[2,3,4]{2,1,0} bitcast(x)
  ROOT o = (f32[4,2,3], f32[8,3], s32[2,3,4]) tuple(c, rc, i)
}"""
  ct.run_and_compare(text)


def test_prefused_input_is_refused_by_our_pipeline():
  text = """
HloModule m
fused {
  p = f32[10] parameter(0)
  q = f32[10] parameter(1)
  d = f32[] constant(2)
  db = f32[10] broadcast(d), dimensions={}
  m = f32[10] multiply(p, db)
  ROOT a = f32[10] add(m, q)
}
ENTRY e {
  x = f32[10] parameter(0)
  y = f32[10] parameter(1)
  ROOT f = f32[10] fusion(x, y), kind=kOutput, calls=fused
}"""
  exe, _ = ct.run_and_compare(text)
  assert "kOutput" not in exe.module.to_string()


def test_loop_with_custom_call_runs_through_python_thunks():
  # A custom call inside the body keeps the loop out of the native runner.
  text = _while_module("(s32[], f32[5])", 4, """
body {
  p = (s32[], f32[5]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x = f32[5] get-tuple-element(p), index=1
  c = f32[5] custom-call(x), custom_call_target="plus_one"
  y = f32[5] multiply(c, c)
  ROOT t = (s32[], f32[5]) tuple(i1, y)
}
""", """
ENTRY e {
  x = f32[5] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[5]) tuple(z, x)
  ROOT w = (s32[], f32[5]) while(t), condition=cond, body=body
}""")
  calls = []

  def plus_one(instr, ops):
    calls.append(1)
    return ops[0] + 1

  x = np.linspace(-0.5, 0.5, 5).astype(np.float32)
  exe, _ = ct.run_and_compare(text, [x], custom_calls={"plus_one": plus_one})
  assert len(calls) == 8  # 4 iterations, ours and the evaluator's
  assert any(type(t).__name__ == "WhileThunk" for t in exe.thunks)


def test_small_loops_run_natively():
  exe, _ = ct.run_and_compare(WHILE_DUS)
  assert [type(t).__name__ for t in exe.thunks] == ["NativeProgramThunk"]


WHILE_READ_ONLY = _while_module(
    "(s32[], f32[128,128], f32[128], f32[128,128])", 3, """
body {
  p = (s32[], f32[128,128], f32[128], f32[128,128]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  w = f32[128,128] get-tuple-element(p), index=1
  c = f32[128] get-tuple-element(p), index=2
  h = f32[128,128] get-tuple-element(p), index=3
  d = f32[128,128] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  cb = f32[128,128] broadcast(c), dimensions={1}
  h1 = f32[128,128] tanh(f32[128,128] add(d, cb))
  ROOT t = (s32[], f32[128,128], f32[128], f32[128,128]) tuple(i1, w, c, h1)
}
""", """
ENTRY e {
  w = f32[128,128] parameter(0)
  h = f32[128,128] parameter(1)
  z = s32[] constant(0)
  c = f32[128] constant({...})
  t = (s32[], f32[128,128], f32[128], f32[128,128]) tuple(z, w, c, h)
  l = (s32[], f32[128,128], f32[128], f32[128,128]) while(t), condition=cond, body=body
  lw = f32[128,128] get-tuple-element(l), index=1
  lh = f32[128,128] get-tuple-element(l), index=3
  nw = f32[128,128] negate(lw)
  ROOT r = (f32[128,128], f32[128,128], f32[128,128]) tuple(lh, nw, %LW%)
}""").replace("constant({...})", "constant({" + ", ".join(
    str(k / 128) for k in range(128)) + "})")


def test_read_only_loop_carries_are_not_copied_in():
  """The weights (a parameter) and the bias (a constant) only pass through
  the body: the loop reads them where they are; only the written carry h
  and the counter are copied in. The dot in the body is split across
  threads and the whole loop still runs natively."""
  rng = np.random.default_rng(0)
  args = [rng.standard_normal((128, 128)).astype(np.float32) / 16,
          rng.standard_normal((128, 128)).astype(np.float32)]
  text = WHILE_READ_ONLY.replace("%LW%", "nw")
  exe, (_, nw, _) = ct.run_and_compare(text, args, rtol=1e-4)
  np.testing.assert_array_equal(nw, -args[0])
  (loop,) = [t for t in exe.plan["thunks"] if t["kind"] == "while"]
  assert sorted(c["bytes"] for c in loop["init"]) == [4, 128 * 128 * 4]
  dots = [t for t in loop["body"] if t["kind"] == "kernel" and
          t["name"] == "d"]
  assert dots and dots[0]["extent"] > 1  # split across the 2 threads
  assert [type(t).__name__ for t in exe.thunks] == ["NativeProgramThunk"]
  # Returned from the program, the weights' carry is an output: copied.
  exe, (_, _, w) = ct.run_and_compare(WHILE_READ_ONLY.replace("%LW%", "lw"),
                                      args, rtol=1e-4)
  np.testing.assert_array_equal(w, args[0])
  w[0, 0] = 7  # a fresh array, not the caller's
  assert args[0][0, 0] != 7


def test_parallel_llvm_parts_agree_and_survive_the_disk_cache(
    tmp_path, monkeypatch):
  # Several kernels: compiled as one LLVM module (1 compile thread) and as
  # parts on 2 threads, the results are bit-identical; the parts' object
  # files are stored and loaded back from the disk cache together.
  from xla.service.cpu import compilation_cache as cc  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import jit  # pylint: disable=g-import-not-at-top
  text = """
HloModule parts
add { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b) }
max { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b) }
ENTRY e {
  x = f32[64,96] parameter(0)
  w = f32[96,32] parameter(1)
  z = f32[] constant(0)
  m = f32[] constant(-inf)
  d = f32[64,32] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[64,32] tanh(d)
  r = f32[64] reduce(t, z), dimensions={1}, to_apply=add
  e2 = f32[64,96] exponential(x)
  c = f32[96] reduce(e2, m), dimensions={0}, to_apply=max
  ROOT out = (f32[64], f32[96], f32[64,32]) tuple(r, c, t)
}"""
  module = ct.parse(text)
  args = ct.random_args(module)
  outs = []
  for threads in ("1", "2"):
    monkeypatch.setenv("XLA_CPU_COMPILE_THREADS", threads)
    cc.CACHE.clear()
    exe = cpu_compiler.compile(module, cpu_compiler.CpuCompileOptions(
        cache_dir=str(tmp_path / threads)))
    assert exe.compile_stats["cache"] == "miss"
    objects = jit.unpack_objects(
        cc.CACHE.get(exe.compile_stats["cache_key"]).object_code)
    assert (len(objects) > 1) == (threads == "2")
    outs.append(exe.execute(args))
    cc.CACHE.clear()
    again = cpu_compiler.compile(module, cpu_compiler.CpuCompileOptions(
        cache_dir=str(tmp_path / threads)))
    assert again.compile_stats["cache"] == "disk"
    for a, b in zip(outs[-1], again.execute(args)):
      np.testing.assert_array_equal(a, b)
  for a, b in zip(*outs):
    np.testing.assert_array_equal(a, b)
  want = HloEvaluator().evaluate(module, args)
  ct.assert_same(outs[0], want, rtol=1e-4, atol=1e-4)


def _constant_module(values) -> str:
  body = ", ".join(str(v) for v in values)
  return f"""HloModule m
ENTRY e {{
  p = f32[{len(values)}] parameter(0)
  c = f32[{len(values)}] constant({{{body}}})
  ROOT a = f32[{len(values)}] add(p, c)
}}"""


def test_cache_key_sees_every_element_of_large_constants():
  # The key elides large constants from the text and hashes their bytes, so
  # programs that differ in one element of a large constant compile apart.
  values = [float(i) for i in range(64)]
  changed = values[:40] + [-1.0] + values[41:]
  key = lambda v: cpu_compiler.cache_key_text(ct.parse(_constant_module(v)))
  assert key(values) == key(list(values))
  assert key(values) != key(changed)
  assert "{...}" in key(values)
  x = np.ones(64, np.float32)
  got = [ct.compile_text(_constant_module(v))[1].execute([x])[0]
         for v in (values, changed)]
  np.testing.assert_array_equal(got[0], x + np.float32(values))
  np.testing.assert_array_equal(got[1], x + np.float32(changed))


def test_an_input_key_stands_for_the_module_in_the_cache_key(monkeypatch):
  # A caller that fingerprints what it built the module from (the plugin:
  # the program's bytes) spares the compiler printing the module for the
  # key; equal input keys then share an entry, different ones do not.
  printed = []
  real = cpu_compiler.cache_key_text
  monkeypatch.setattr(cpu_compiler, "cache_key_text",
                      lambda m: printed.append(1) or real(m))
  values = [float(i) for i in range(64)]
  compile_with = lambda key: cpu_compiler.compile(
      ct.parse(_constant_module(values)),
      cpu_compiler.CpuCompileOptions(input_key=key))
  first = compile_with("input-a")
  assert not printed
  assert compile_with("input-a").compile_stats["cache"] == "memory"
  assert compile_with("input-b").compile_stats["cache"] == "miss"
  assert first.compile_stats["cache_key"] != compile_with(
      None).compile_stats["cache_key"]
  assert printed == [1]


def test_conditional_operand_with_one_value_twice():
  # A branch's tuple argument holding the same value at two leaves (JAX's
  # spence in f64 passes one): buffer assignment needs a buffer per leaf of
  # the branch parameter, so copy insertion copies the repeat.
  text = """HloModule m
left {
  t = (f64[], f64[], f64[]) parameter(0)
  a = f64[] get-tuple-element(t), index=0
  c = f64[] get-tuple-element(t), index=2
  s = f64[] add(a, c)
  ROOT r = (f64[]) tuple(s)
}
right {
  t = (f64[], f64[], f64[]) parameter(0)
  b = f64[] get-tuple-element(t), index=1
  ROOT r = (f64[]) tuple(b)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f64[] parameter(1)
  y = f64[] parameter(2)
  args = (f64[], f64[], f64[]) tuple(x, y, x)
  ROOT c = (f64[]) conditional(p, args, args), true_computation=left, false_computation=right
}"""
  for flag, want in ((True, 4.0), (False, 3.0)):
    _, got = ct.run_and_compare(
        text, [np.bool_(flag), np.float64(2.0), np.float64(3.0)])
    assert float(got[0]) == want


def test_swap_in_a_loop_reads_before_the_first_in_place_update():
  # Each step swaps x[i] and x[3 - i] with two dynamic-update-slices of the
  # loop carry (JAX's lu_pivots_to_permutation under vmap does this with
  # scatters). The read of x[i] feeds only the second update, so it must
  # still run before the first one writes x's buffer in place.
  text = """HloModule m
body {
  p = (s32[4], s32[]) parameter(0)
  x = s32[4] get-tuple-element(p), index=0
  i = s32[] get-tuple-element(p), index=1
  three = s32[] constant(3)
  j = s32[] subtract(three, i)
  a = s32[1] dynamic-slice(x, i), dynamic_slice_sizes={1}
  b = s32[1] dynamic-slice(x, j), dynamic_slice_sizes={1}
  upd1 = s32[4] dynamic-update-slice(x, b, i)
  upd2 = s32[4] dynamic-update-slice(upd1, a, j)
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT r = (s32[4], s32[]) tuple(upd2, next)
}
cond {
  p = (s32[4], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=1
  two = s32[] constant(2)
  ROOT lt = pred[] compare(i, two), direction=LT
}
ENTRY e {
  x = s32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[4], s32[]) tuple(x, zero)
  w = (s32[4], s32[]) while(init), condition=cond, body=body
  ROOT out = s32[4] get-tuple-element(w), index=0
}"""
  _, got = ct.run_and_compare(text, [np.arange(10, 14, dtype=np.int32)])
  np.testing.assert_array_equal(got[0], [13, 12, 11, 10])


def test_bitcast_convert_to_the_same_type():
  # pred -> pred (and any same-type bitcast-convert) is the identity. It
  # used to be folded away when its operand was a constant; splat constants
  # now import as broadcasts, so it reaches codegen.
  text = """HloModule m
ENTRY e {
  t = pred[] constant(true)
  b = pred[2,3] broadcast(t), dimensions={}
  ROOT r = pred[2,3] bitcast-convert(b)
}"""
  _, got = ct.run_and_compare(text, [])
  np.testing.assert_array_equal(got[0], np.ones((2, 3), bool))


def test_optimized_module_is_the_partitioned_program():
  module = hlo_parser.parse_and_return_unverified_module(
      "HloModule m, num_partitions=2\nENTRY e {\n"
      "  a = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
      "  ROOT s = f32[8] sine(a), sharding={replicated}\n}\n")
  before = module.to_string()
  out = cpu_compiler.optimized_module(module)
  assert module.to_string() == before  # a clone is optimized
  assert out.entry_computation.parameter_instructions[0].shape.dimensions == (
      4,)
  assert any(i.opcode.value == "all-gather"
             for c in out.computations for i in c.instructions)
