"""Tests for jit.py: splitting a module into parts, the object bundle, and
compiling parts on parallel threads."""

import ctypes
import os
import subprocess
import sys

from llvmlite import binding as llvm
from llvmlite import ir
import pytest

import support
from xla.service.cpu import jit

I64 = ir.IntType(64)
FN_TY = ir.FunctionType(I64, [I64])


def _module(n_kernels=4, with_pair=True):
  """Kernels k<i>(x) = x * (i + 1) + helper(x) + table[i % 2]; with_pair:
  `pair(x)` = k0(x) + 1 (a kernel calling another kernel)."""
  m = ir.Module(name="jit_test")
  jit.configure_module(m)
  helper = ir.Function(m, FN_TY, "helper")  # external linkage, as emitted
  helper.attributes.add("alwaysinline")
  b = ir.IRBuilder(helper.append_basic_block("entry"))
  b.ret(b.add(b.mul(helper.args[0], helper.args[0]), I64(7)))
  table_ty = ir.ArrayType(I64, 2)
  table = ir.GlobalVariable(m, table_ty, "table")
  table.linkage = "internal"
  table.global_constant = True
  table.initializer = ir.Constant(table_ty, [100, 200])
  unused = ir.Function(m, FN_TY, "unused_helper")
  b = ir.IRBuilder(unused.append_basic_block("entry"))
  b.ret(unused.args[0])
  kernels = []
  for i in range(n_kernels):
    fn = ir.Function(m, FN_TY, f"k{i}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x = fn.args[0]
    v = b.add(b.mul(x, I64(i + 1)), b.call(helper, [x]))
    t = b.load(b.gep(table, [ir.Constant(ir.IntType(32), 0),
                             ir.Constant(ir.IntType(32), i % 2)]))
    b.ret(b.add(v, t))
    kernels.append(fn)
  if with_pair:
    fn = ir.Function(m, FN_TY, "pair")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.add(b.call(kernels[0], [fn.args[0]]), I64(1)))
  return m


def _expected(name, x):
  if name == "pair":
    return _expected("k0", x) + 1
  i = int(name[1:])
  return x * (i + 1) + x * x + 7 + (100, 200)[i % 2]


def _defined(text):
  mod = llvm.parse_assembly(text)
  return {f.name: f for f in mod.functions if not f.is_declaration}, mod


def test_pack_objects_round_trip():
  assert jit.pack_objects([b"abc"]) == b"abc"  # one object: itself
  assert jit.unpack_objects(b"plain object") == [b"plain object"]
  objs = [b"first", b"", b"\x00" * 10]
  assert jit.unpack_objects(jit.pack_objects(objs)) == objs
  with pytest.raises(support.InternalError):
    jit.unpack_objects(jit.pack_objects(objs)[:-3])


def test_partition_keeps_callers_together_and_copies_helpers():
  m = _module(4)
  exported = ["k0", "k1", "k2", "k3", "pair"]
  texts = jit.partition_module(m, exported, parts=3)
  assert len(texts) == 3
  seen = []
  for text in texts:
    fns, mod = _defined(text)
    mod.verify()
    roots = [n for n in fns if n in exported]
    seen += roots
    if "pair" in fns or "k0" in fns:
      assert "pair" in fns and "k0" in fns
    # The helper travels with every part that calls it, made internal so
    # the parts' copies cannot clash; the unreachable one is dropped.
    assert "helper" in fns
    assert fns["helper"].linkage == llvm.Linkage.internal
    assert "unused_helper" not in fns
    for n in roots:
      assert fns[n].linkage == llvm.Linkage.external
  assert sorted(seen) == sorted(exported)
  # The original module is left as it was.
  assert m.globals["helper"].linkage == ""


def test_partition_not_more_parts_than_units():
  m = _module(2, with_pair=False)
  assert len(jit.partition_module(m, ["k0", "k1"], parts=8)) == 2
  assert len(jit.partition_module(m, ["k0", "k1"], parts=1)) == 1


def _twins_module():
  """t0, t1: the same body (x * 3 + 1) under two names; t2 another body;
  caller calls t1 (so t1 is not a stand-alone kernel)."""
  m = ir.Module(name="twins")
  jit.configure_module(m)
  fns = {}
  for name, k in (("t0", 3), ("t1", 3), ("t2", 5), ("t3", 3)):
    fn = ir.Function(m, FN_TY, name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.add(b.mul(fn.args[0], I64(k)), I64(1)))
    fns[name] = fn
  caller = ir.Function(m, FN_TY, "caller")
  b = ir.IRBuilder(caller.append_basic_block("entry"))
  b.ret(b.call(fns["t1"], [caller.args[0]]))
  return m


def test_partition_compiles_identical_kernels_once():
  m = _twins_module()
  aliases = {}
  texts = jit.partition_module(m, ["t0", "t1", "t2", "t3", "caller"],
                               parts=2, aliases=aliases)
  # t3 is t0 under another name; t1 is too, but a function calls it.
  assert aliases == {"t3": "t0"}
  defined = set()
  for text in texts:
    defined |= set(_defined(text)[0])
  assert "t3" not in defined and {"t0", "t1", "t2", "caller"} <= defined
  objs = jit.compile_objects(_twins_module(), ["t0", "t1", "t2", "t3"],
                             threads=1, aliases=(found := {}))
  assert found == {"t3": "t0"}  # caller still names t1 (unused or not)
  engine = jit.CpuJit(2)
  engine.load_object_code(jit.pack_objects(objs))
  for name, k in (("t1", 3), ("t2", 5), ("t3", 3)):
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
        engine.address(found.get(name, name)))
    assert fn(10) == 10 * k + 1


def test_partition_refuses_external_global():
  m = _module(2, with_pair=False)
  g = ir.GlobalVariable(m, I64, "shared_state")
  g.initializer = I64(0)
  assert jit.partition_module(m, ["k0", "k1"], parts=2) is None


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_compile_objects_runs_every_kernel(threads):
  m = _module(6)
  exported = [f"k{i}" for i in range(6)] + ["pair"]
  objs = jit.compile_objects(m, exported, threads=threads)
  parts = threads * jit._PARTS_PER_THREAD  # pylint: disable=protected-access
  assert len(objs) == (1 if threads == 1 else min(parts, 6))
  cj = jit.CpuJit()
  cj.load_object_code(jit.pack_objects(objs))
  for name in exported:
    f = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(cj.address(name))
    for x in (0, 3, -5):
      assert f(x) == _expected(name, x), (name, x)


def test_compile_objects_reports_invalid_ir():
  m = ir.Module(name="bad")
  jit.configure_module(m)
  for i in range(2):
    fn = ir.Function(m, FN_TY, f"k{i}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(fn.args[0])
  # A block with no terminator is invalid IR.
  m.globals["k1"].append_basic_block("dangling")
  with pytest.raises(support.InternalError, match="invalid LLVM IR"):
    jit.compile_objects(m, ["k0", "k1"], threads=2)


def test_compile_threads_from_environment(monkeypatch):
  monkeypatch.setenv("XLA_CPU_COMPILE_THREADS", "3")
  assert jit.compile_threads() == 3
  monkeypatch.setenv("XLA_CPU_COMPILE_THREADS", "zero")
  assert jit.compile_threads() >= 1


def _compile_in_child(queue):
  m = _module(4, with_pair=False)
  objs = jit.compile_objects(m, [f"k{i}" for i in range(4)], threads=2)
  cj = jit.CpuJit()
  cj.load_object_code(jit.pack_objects(objs))
  f = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(cj.address("k3"))
  queue.put(f(2))


_FORK_SCRIPT = """
import multiprocessing
from xla.service.cpu import jit
from xla.service.cpu import jit_test
jit.compile_objects(jit_test._module(4, with_pair=False),
                    [f"k{i}" for i in range(4)], threads=2)
ctx = multiprocessing.get_context("fork")
queue = ctx.Queue()
p = ctx.Process(target=jit_test._compile_in_child, args=(queue,))
p.start()
p.join(60)
if p.is_alive():
  p.kill()
  raise SystemExit("compile in a forked child hung")
assert p.exitcode == 0, p.exitcode
print(queue.get(timeout=5))
"""


def test_compile_objects_in_forked_child():
  # The parent's compile threads do not survive a fork; the child must get
  # threads of its own rather than wait on the inherited pool. (Run in a
  # fresh interpreter: forking this one, which may hold other libraries'
  # threads, is not safe.)
  root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.dirname(os.path.abspath(__file__)))))
  env = dict(os.environ, PYTHONPATH=root + os.pathsep +
             os.environ.get("PYTHONPATH", ""))
  out = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], env=env,
                       cwd=root, capture_output=True, text=True,
                       timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  assert int(out.stdout.split()[-1]) == _expected("k3", 2)


def test_runtime_library_functions_resolve():
  # Kernels call libm (fmodf) and compiler-runtime helpers (__truncdfhf2 for
  # f64 -> f16); the JIT must resolve them to real functions. Unresolved,
  # they were bound to address 0 in large modules (a segfault).
  jit.CpuJit(0)
  for name in ("fmodf", "fmod", "__truncdfhf2", "__extendhfsf2"):
    assert llvm.address_of_symbol(name), name


def _module_with_shared_helper(n_kernels=3):
  """Kernels s<i>(x) = shared(x) + i, where `shared` is a noinline helper
  (as the FFT kernels' axis transforms are)."""
  m = ir.Module(name="jit_shared")
  jit.configure_module(m)
  shared = ir.Function(m, FN_TY, "shared")
  shared.linkage = "internal"
  shared.attributes.add("noinline")
  b = ir.IRBuilder(shared.append_basic_block("entry"))
  b.ret(b.mul(shared.args[0], I64(3)))
  for i in range(n_kernels):
    fn = ir.Function(m, FN_TY, f"s{i}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.add(b.call(shared, [fn.args[0]]), I64(i)))
  return m


def test_partition_compiles_shared_noinline_helper_once():
  m = _module_with_shared_helper(3)
  exported = ["s0", "s1", "s2"]
  texts = jit.partition_module(m, exported, parts=4)
  defining = []
  for text in texts:
    fns, mod = _defined(text)
    mod.verify()
    if "shared" in fns:
      defining.append(fns["shared"])
    elif any(n in fns for n in exported):
      # Declared where it is called, not copied.
      assert "declare" in text and '@"shared"' in text
  assert len(defining) == 1
  assert defining[0].linkage == llvm.Linkage.external
  assert m.globals["shared"].linkage == "internal"  # module unchanged
  # The parts link when their objects are loaded together.
  objs = jit.compile_objects(m, exported, threads=2)
  cj = jit.CpuJit()
  cj.load_object_code(jit.pack_objects(objs))
  for i, name in enumerate(exported):
    f = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(cj.address(name))
    assert f(5) == 15 + i


def _sorts_module():
  """Kernels r<i>(x) = cmp<i>(x) + table<i>[0], each with a helper and a
  constant of its own: r0 and r1 are the same code under other names; r2's
  constant differs."""
  m = ir.Module(name="jit_units")
  jit.configure_module(m)
  for i, value in enumerate((7, 7, 8)):
    cmp = ir.Function(m, FN_TY, f"cmp{i}")
    cmp.linkage = "internal"
    cmp.attributes.add("alwaysinline")
    b = ir.IRBuilder(cmp.append_basic_block("entry"))
    b.ret(b.mul(cmp.args[0], I64(2)))
    table = ir.GlobalVariable(m, I64, f"table{i}")
    table.linkage = "internal"
    table.global_constant = True
    table.initializer = I64(value)
    fn = ir.Function(m, FN_TY, f"r{i}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.add(b.call(cmp, [fn.args[0]]), b.load(table)))
  return m


def test_partition_compiles_kernels_equal_with_their_helpers_once():
  # The same sort emitted twice has its own comparator (and constants)
  # each time: the kernels are equal once those are renamed consistently.
  aliases = {}
  texts = jit.partition_module(_sorts_module(), ["r0", "r1", "r2"],
                               parts=3, aliases=aliases)
  assert aliases == {"r1": "r0"}
  defined = set()
  for text in texts:
    defined |= set(_defined(text)[0])
  assert "r1" not in defined and "cmp1" not in defined
  objs = jit.compile_objects(_sorts_module(), ["r0", "r1", "r2"], threads=2,
                             aliases=(found := {}))
  engine = jit.CpuJit(2)
  engine.load_object_code(jit.pack_objects(objs))
  for name, want in (("r0", 27), ("r1", 27), ("r2", 28)):
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
        engine.address(found.get(name, name)))
    assert fn(10) == want


def _call(engine, name, x, aliases=None):
  name = (aliases or {}).get(name, name)
  return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
      engine.address(name))(x)


def test_streaming_compile_parts_link_and_dedupe():
  # Kernels handed over one at a time, a part every few kernels: equal
  # kernels (with their own helpers and constants) are compiled once, the
  # noinline helper is defined in one part only, and everything links.
  m = _sorts_module()
  helper = ir.Function(m, FN_TY, "shared")
  helper.linkage = "internal"
  helper.attributes.add("noinline")
  b = ir.IRBuilder(helper.append_basic_block("entry"))
  b.ret(b.mul(helper.args[0], I64(3)))
  for i in range(3):
    fn = ir.Function(m, FN_TY, f"s{i}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.add(b.call(helper, [fn.args[0]]), I64(i)))
  prepared = []
  stream = jit.StreamingCompile(m, threads=2, part_chars=1,
                                prepare=prepared.append)
  names = ["r0", "s0", "r1", "s1", "r2", "s2"]
  for n in names:
    stream.add([n])
  objs = stream.finish(names)
  assert stream.aliases == {"r1": "r0"}
  assert len(objs) >= 3  # parts were cut while kernels were added
  assert "shared" in {f.name for f in prepared}
  defining = [t for t in stream._parts  # pylint: disable=protected-access
              if 'define i64 @"shared"' in t]
  assert len(defining) == 1
  engine = jit.CpuJit(2)
  engine.load_object_code(jit.pack_objects(objs))
  want = {"r0": 27, "r1": 27, "r2": 28, "s0": 30, "s1": 31, "s2": 32}
  for n in names:
    assert _call(engine, n, 10, stream.aliases) == want[n]


def test_streaming_compile_defines_an_aliased_kernel_that_is_called():
  # r1 equals r0, but a later kernel calls r1 by name: r1 is compiled.
  m = _sorts_module()
  r1 = m.globals["r1"]
  caller = ir.Function(m, FN_TY, "caller")
  b = ir.IRBuilder(caller.append_basic_block("entry"))
  b.ret(b.add(b.call(r1, [caller.args[0]]), I64(1)))
  stream = jit.StreamingCompile(m, threads=2, part_chars=1)
  for n in ("r0", "r1", "caller"):
    stream.add([n])
  objs = stream.finish(["r0", "r1", "caller"])
  assert "r1" not in stream.aliases
  engine = jit.CpuJit(2)
  engine.load_object_code(jit.pack_objects(objs))
  assert _call(engine, "caller", 10) == 28
  assert _call(engine, "r1", 10) == 27


def _record_parts(monkeypatch):
  """[(kernels a part defines, its codegen level)] of every part compiled."""
  seen = []
  real = jit._compile_part  # pylint: disable=protected-access

  def compile_part(text, opt_level, unlocked, codegen_level=None):
    defined = set()
    for line in text.splitlines():
      if line.startswith("define"):
        defined.add(line.split("@", 1)[1].split("(", 1)[0].strip('"'))
    seen.append((defined & {f"k{i}" for i in range(16)}, codegen_level))
    return real(text, opt_level, unlocked, codegen_level)

  monkeypatch.setattr(jit, "_compile_part", compile_part)
  return seen


@pytest.mark.parametrize("small_costs", [4, 2])
def test_streaming_compile_small_kernels_get_fast_codegen_parts(
    monkeypatch, small_costs):
  # Kernels of SMALL_KERNEL_COST element-operations or less get parts of
  # their own, generated at SMALL_KERNEL_CODEGEN_LEVEL, when there are
  # SMALL_KERNELS_MIN of them; an unknown cost (0) is not small. Fewer
  # small kernels stay in the ordinary parts.
  assert jit.SMALL_KERNELS_MIN == 4
  seen = _record_parts(monkeypatch)
  names = [f"k{i}" for i in range(7)]
  small = names[:small_costs]
  costs = [(1, jit.SMALL_KERNEL_COST)[i % 2] if n in small else c
           for i, (n, c) in enumerate(zip(
               names, [jit.SMALL_KERNEL_COST + 1] * 4 + [10**6, 0, 10**6]))]
  m = _module(7, with_pair=False)
  stream = jit.StreamingCompile(m, threads=2)
  stream.add(names, costs)
  objs = stream.finish(names)
  fast = set().union(*[k for k, lvl in seen if lvl is not None])
  ordinary = set().union(*[k for k, lvl in seen if lvl is None])
  assert all(lvl in (None, jit.SMALL_KERNEL_CODEGEN_LEVEL) for _, lvl in seen)
  if small_costs >= jit.SMALL_KERNELS_MIN:
    assert fast == set(small) and ordinary == set(names) - set(small)
  else:
    assert not fast and ordinary == set(names)
  engine = jit.CpuJit(2)
  engine.load_object_code(jit.pack_objects(objs))
  for n in names:
    assert _call(engine, n, 5, stream.aliases) == _expected(n, 5)


@pytest.mark.parametrize("threads", [1, 2])
def test_streaming_compile_whole_module_cases(threads):
  # One thread: the module compiles as one object. A global that is not
  # internal must exist once: the module is compiled whole as well.
  m = _module(3, with_pair=False)
  names = ["k0", "k1", "k2"]
  if threads == 2:
    g = ir.GlobalVariable(m, I64, "shared_state")
    g.initializer = I64(5)
    fn = ir.Function(m, FN_TY, "k_state")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.add(b.load(g), fn.args[0]))
    names.append("k_state")
  stream = jit.StreamingCompile(m, threads=threads, part_chars=1)
  for n in names:
    stream.add([n])
  objs = stream.finish(names)
  assert len(objs) == 1
  engine = jit.CpuJit(2)
  engine.load_object_code(jit.pack_objects(objs))
  for n in names:
    want = 9 if n == "k_state" else _expected(n, 4)
    assert _call(engine, n, 4, stream.aliases) == want


def test_load_cached_compiles_once_across_engines(tmp_path, monkeypatch):
  # Code that is the same in every process (the runtime's native helpers)
  # is compiled once and then loaded from the disk cache.
  monkeypatch.setenv("XLA_CPU_LIBRARY_CACHE", str(tmp_path))
  compiles = []
  real = jit.compile_objects_text
  monkeypatch.setattr(jit, "compile_objects_text",
                      lambda text, *a: compiles.append(text) or real(text, *a))
  text = str(_module(2, with_pair=False))
  for _ in range(2):
    engine = jit.CpuJit(1)
    engine.load_cached(text, "helpers")
    assert _call(engine, "k1", 3) == _expected("k1", 3)
  assert len(compiles) == 1
  (entry,) = os.listdir(tmp_path)
  assert entry.startswith("helpers-")
  # A damaged entry is compiled again, not loaded.
  with open(tmp_path / entry, "r+b") as f:
    f.seek(60)
    f.write(b"\xff\xff\xff\xff")
  engine = jit.CpuJit(1)
  engine.load_cached(text, "helpers")
  assert _call(engine, "k0", 3) == _expected("k0", 3)
  assert len(compiles) == 2


def test_load_cached_by_source_makes_the_ir_only_on_a_miss(tmp_path,
                                                           monkeypatch):
  # Code generated from a builder is cached under its name and the
  # generating sources: a process with the code on disk neither compiles
  # it nor builds its IR; a change of the sources is a miss.
  monkeypatch.setenv("XLA_CPU_LIBRARY_CACHE", str(tmp_path))
  builds = []

  def build():
    builds.append(1)
    return _module(2, with_pair=False)

  for _ in range(2):
    engine = jit.CpuJit(1)
    engine.load_cached(build, "built_helpers")
    assert _call(engine, "k1", 3) == _expected("k1", 3)
  assert len(builds) == 1
  monkeypatch.setattr(jit, "source_key", lambda: "other sources")
  engine = jit.CpuJit(1)
  engine.load_cached(build, "built_helpers")
  assert _call(engine, "k0", 3) == _expected("k0", 3)
  assert len(builds) == 2


def _resident_mib() -> float:
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                    reason="needs /proc/self/statm")
@pytest.mark.parametrize("unlocked", [False, True])
def test_compiling_parts_does_not_leak_pass_managers(unlocked):
  # llvmlite never frees a module pass manager by itself: 30-55 KB per
  # compiled part, which grew a long JAX test run by gigabytes.
  module = ir.Module(name="leak")
  fn = ir.Function(module, ir.FunctionType(ir.DoubleType(),
                                           [ir.DoubleType()]), "square")
  b = ir.IRBuilder(fn.append_basic_block())
  b.ret(b.fmul(fn.args[0], fn.args[0]))
  text = str(module)
  jit._initialize()
  trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
  for _ in range(20):
    jit._compile_part(text, 3, unlocked)  # pylint: disable=protected-access
  if trim:
    trim(0)
  before = _resident_mib()
  for _ in range(300):
    jit._compile_part(text, 3, unlocked)  # pylint: disable=protected-access
  if trim:
    trim(0)
  grown = _resident_mib() - before
  assert grown < 6, f"300 compiles grew the resident set by {grown:.1f} MiB"
