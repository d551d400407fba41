"""Tests for ir_emitter.py's lazy loading of the registered emitters."""

import os
import subprocess
import sys
import textwrap

import pytest

import support
from xla.service.cpu import ir_emitter
from xla.service.cpu import kernel_api


def test_table_matches_what_modules_register():
  # Every module of the table registers exactly the opcodes listed for it.
  ir_emitter.load_emitter_modules()
  registered = {op: kernel_api.kernel_emitter(op).__module__
                for op in kernel_api.registered_opcodes()}
  assert registered == ir_emitter.EMITTERS


def test_every_emitter_module_is_in_the_table():
  # The source directory (under Bazel the runfiles link to it).
  here = os.path.dirname(os.path.realpath(ir_emitter.__file__))
  core = {"elemental_ir_emitter", "fusion_emitter", "reduction_emitter",
          "thunk_emitter", "ir_emitter", "loop_emitter"}
  modules = {f"xla.service.cpu.{f[:-3]}" for f in os.listdir(here)
             if f.endswith("_emitter.py") and f[:-3] not in core}
  assert modules == set(ir_emitter.emitter_modules())


def test_a_broken_emitter_module_is_an_internal_error(monkeypatch):
  # A module that fails to import is reported as the bug it is, not as
  # "opcode not implemented".
  monkeypatch.setitem(ir_emitter.EMITTERS, "no-such-opcode",
                      "xla.service.cpu.no_such_emitter_module")
  with pytest.raises(support.InternalError,
                     match="no_such_emitter_module failed to import"):
    ir_emitter.emitter_for("no-such-opcode")


def test_emitter_for_unknown_opcode_is_none():
  assert ir_emitter.emitter_for("no-such-opcode") is None


def test_compiling_a_dot_imports_only_its_emitter():
  # In a fresh process: a program with a dot needs dot_emitter, not (say)
  # rng_emitter, which pulls in the StableHLO interpreter.
  root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.dirname(os.path.abspath(__file__)))))
  script = textwrap.dedent("""
      import sys
      from xla.hlo.parser import hlo_parser
      from xla.service.cpu import cpu_compiler
      m = hlo_parser.parse_and_return_unverified_module('''
      HloModule m
      ENTRY e {
        a = f32[4,8] parameter(0)
        b = f32[8,3] parameter(1)
        ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      }''')
      cpu_compiler.compile(m)
      print("dot" if "xla.service.cpu.dot_emitter" in sys.modules else "-")
      print("rng" if "xla.service.cpu.rng_emitter" in sys.modules else "-")
  """)
  env = dict(os.environ, PYTHONPATH=root + os.pathsep +
             os.environ.get("PYTHONPATH", ""))
  out = subprocess.run([sys.executable, "-c", script], env=env, cwd=root,
                       capture_output=True, text=True, timeout=120,
                       check=True).stdout.split()
  assert out == ["dot", "-"]


def test_kernel_names_stay_unique_when_bases_collide():
  """"fusion.multi.1" twice and then "fusion.multi.1.1" clean to the same
  symbol; each must still get its own (two variances over different dims
  of one array failed to compile with a duplicated name)."""
  from llvmlite import ir  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import kernel_api  # pylint: disable=g-import-not-at-top
  ctx = kernel_api.KernelContext(ir.Module("m"))
  names = [ctx.new_kernel(base)[0].name for base in (
      "fusion.multi.1", "fusion.multi.1", "fusion.multi.1.1",
      "fusion_multi_1_1", "fusion.multi.1")]
  assert len(set(names)) == len(names), names
  assert names[0] == "fusion_multi_1"


def test_two_fusions_whose_names_collide_compile():
  from xla.service.cpu import cpu_testing as ct  # pylint: disable=g-import-not-at-top
  text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[3,4,5] parameter(0)
  z = f32[] constant(0)
  r1 = f32[3,5] reduce(x, z), dimensions={1}, to_apply=add
  q = f32[3,4,5] multiply(x, x)
  r2 = f32[3,5] reduce(q, z), dimensions={1}, to_apply=add
  r3 = f32[3,4] reduce(x, z), dimensions={2}, to_apply=add
  r4 = f32[3,4] reduce(q, z), dimensions={2}, to_apply=add
  ROOT t = (f32[3,5], f32[3,5], f32[3,4], f32[3,4]) tuple(r1, r2, r3, r4)
}"""
  ct.run_and_compare(text)
