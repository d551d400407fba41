"""Tests for runtime_library: routines compiled once, cached on disk, and
resolved when kernels that call them are loaded."""

import ctypes
import os
import subprocess
import sys

from llvmlite import ir
import pytest

import support
from xla.service.cpu import jit
from xla.service.cpu import runtime_library as rl

I64 = ir.IntType(64)
FN_TY = ir.FunctionType(I64, [I64])
NAME = rl.PREFIX + "test_triple"


@rl.routine(NAME, FN_TY)
def _build_triple(fn):
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  b.ret(b.mul(fn.args[0], I64(3)))


def _caller_text(callee: str = NAME) -> str:
  m = ir.Module(name="caller")
  jit.configure_module(m)
  f = ir.Function(m, FN_TY, "kernel")
  b = ir.IRBuilder(f.append_basic_block("entry"))
  if callee == NAME:
    target = rl.declare(m, NAME)
  else:
    target = ir.Function(m, FN_TY, callee)
  b.ret(b.add(b.call(target, [f.args[0]]), I64(1)))
  return str(m)


def _call(engine, name, x):
  return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
      engine.address(name))(x)


@pytest.fixture
def fresh(tmp_path, monkeypatch):
  """An empty disk cache, and the routine not loaded in this process."""
  monkeypatch.setenv("XLA_CPU_LIBRARY_CACHE", str(tmp_path))
  monkeypatch.delitem(rl._LOADED, NAME, raising=False)  # pylint: disable=protected-access
  compiles = []
  real = jit.compile_objects_text

  def counted(text, *a, **k):
    compiles.append(text)
    return real(text, *a, **k)
  monkeypatch.setattr(jit, "compile_objects_text", counted)
  return tmp_path, compiles


def test_kernel_calling_a_routine_runs_and_the_routine_compiles_once(fresh):
  cache, compiles = fresh
  engine = jit.CpuJit()
  engine.compile(_caller_text())
  assert _call(engine, "kernel", 5) == 16
  # A second program (as object code this time) reuses the loaded routine.
  other = jit.CpuJit()
  other.load_object_code(jit.compile_objects_text(_caller_text()))
  assert _call(other, "kernel", 7) == 22
  assert sum(f'define i64 @"{NAME}"' in t for t in compiles) == 1
  assert [f for f in os.listdir(cache) if f.startswith(NAME)]


def test_a_new_process_loads_the_routine_from_the_disk_cache(fresh):
  cache, _ = fresh
  rl.ensure([NAME])
  (entry,) = [f for f in os.listdir(cache) if f.startswith(NAME)]
  # The child counts its compiles of the routine: none, it loads the file.
  code = (
      "import sys\n"
      "sys.path.insert(0, sys.argv[1])\n"
      "from xla.service.cpu import jit\n"
      "from xla.service.cpu import runtime_library_test as t\n"
      "calls = []\n"
      "real = jit.compile_objects_text\n"
      "jit.compile_objects_text = lambda s, *a: calls.append(s) or real(s, *a)\n"
      "t.rl.ensure([t.NAME])\n"
      "e = jit.CpuJit()\n"
      "e.load_object_code(real(t._caller_text()))\n"
      "print(t._call(e, 'kernel', 2), len(calls))\n")
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))))
  out = subprocess.run([sys.executable, "-c", code, root], check=True,
                       capture_output=True, text=True,
                       env=dict(os.environ, XLA_CPU_LIBRARY_CACHE=str(cache)))
  assert out.stdout.split() == ["7", "0"]
  assert os.path.exists(os.path.join(cache, entry))


def test_a_damaged_cache_entry_is_compiled_again(fresh):
  cache, _ = fresh
  key = jit._code_key(rl.routine_text(NAME), 3)  # pylint: disable=protected-access
  with open(os.path.join(cache, f"{NAME}-{key}.o"), "wb") as f:
    f.write(b"not an object file")
  engine = jit.CpuJit()
  engine.compile(_caller_text())
  assert _call(engine, "kernel", 1) == 4


def test_disabled_disk_cache_still_compiles(fresh, monkeypatch):
  cache, _ = fresh
  monkeypatch.setenv("XLA_CPU_LIBRARY_CACHE", "")
  assert jit.code_cache_dir() is None
  engine = jit.CpuJit()
  engine.compile(_caller_text())
  assert _call(engine, "kernel", 0) == 1
  assert not os.listdir(cache)


def test_unknown_routine_is_an_error_not_a_crash():
  engine = jit.CpuJit()
  with pytest.raises(support.InternalError, match="not available"):
    engine.compile(_caller_text(rl.PREFIX + "no_such_routine"))


def test_declare_unknown_routine_is_an_error():
  m = ir.Module(name="m")
  with pytest.raises(support.InternalError, match="no library routine"):
    rl.declare(m, rl.PREFIX + "no_such_routine")
