"""Tests for ir_emitter.py's lazy loading of the registered emitters."""

import os
import subprocess
import sys
import textwrap

from xla.service.cpu import ir_emitter
from xla.service.cpu import kernel_api


def test_hints_name_every_emitter_module():
  assert set(ir_emitter.OPCODE_HINTS) == set(ir_emitter.EMITTER_MODULES)


def test_hints_match_what_modules_register():
  errors = ir_emitter.load_emitter_modules()
  for module, opcodes in ir_emitter.OPCODE_HINTS.items():
    if module in errors:
      continue
    for op in opcodes:
      emitter = kernel_api.kernel_emitter(op)
      assert emitter is not None, (module, op)
      assert emitter.__module__ == module, (module, op, emitter.__module__)


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
