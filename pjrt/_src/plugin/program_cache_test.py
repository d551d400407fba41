"""The plugin's persistent cache of compiled programs: a program compiled
in one process loads in another without being parsed; anything that
changes the code (the program, the options, flags) misses."""

import ast
import os
import subprocess
import sys

import numpy as np
import pytest

import support
from pjrt._src.plugin import backends
from pjrt._src.plugin import options as options_lib
from pjrt._src.plugin import program_cache
from pjrt._src.plugin import programs

pytestmark = pytest.mark.skipif(backends.cpu_compiler_module() is None,
                                reason="the cpu backend is not available")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

# The child compiles a program (argv[3]) through the plugin with the cache
# in argv[1], runs it, and prints how often it parsed a program, the
# output and the output types.
_CHILD = r'''
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np
import support
from pjrt._src.plugin import program_cache, programs, testing
parsed = []
real = programs.load
programs.load = lambda *a, **k: parsed.append(1) or real(*a, **k)
with support.flags.override(openxla_cpu_compilation_cache_dir=sys.argv[1]):
  client = testing.client(backend="cpu")
  exe = client.compile(sys.argv[3])
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  out = exe.execute([client.buffer_from_numpy(x),
                     client.buffer_from_numpy(x)])
  print(len(parsed), "|", out[0].to_numpy().tolist(), "|",
        [t.name for t in exe.output_element_types()])
'''

_PROGRAM = """
func.func @main(%a: tensor<2x3xf32> {tf.aliasing_output = 0 : i32},
                %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %e = stablehlo.exponential %a : tensor<2x3xf32>
  %s = stablehlo.add %e, %b : tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}"""


def _run_child(cache, program=_PROGRAM):
  out = subprocess.run([sys.executable, "-c", _CHILD, str(cache), _ROOT,
                        program], check=True, capture_output=True,
                       text=True)
  return [part.strip() for part in out.stdout.strip().split("|")]


def test_a_second_process_loads_the_program_without_parsing_it(tmp_path):
  first = _run_child(tmp_path)
  second = _run_child(tmp_path)
  assert first[0] == "1" and second[0] == "0"
  # The same results and output types as the compiled program.
  assert first[1:] == second[1:]
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  got = np.array(ast.literal_eval(second[1]), np.float32)
  np.testing.assert_allclose(got, np.exp(x) + x, rtol=1e-6)
  assert second[2] == "['F32']"


def test_a_changed_program_misses(tmp_path):
  _run_child(tmp_path)
  other = _PROGRAM.replace("stablehlo.add", "stablehlo.subtract")
  assert _run_child(tmp_path, other)[0] == "1"


def test_the_key_follows_the_program_options_and_flags():
  opts = options_lib.CompileOptions()
  base = program_cache.key(b"code", "mlir", opts, "cpu", True)
  assert base == program_cache.key(b"code", "mlir", opts, "cpu", True)
  assert base != program_cache.key(b"code2", "mlir", opts, "cpu", True)
  assert base != program_cache.key(b"code", "mlir",
                                   options_lib.CompileOptions(num_replicas=2),
                                   "cpu", True)
  assert base != program_cache.key(b"code", "mlir", opts, "cpu", False)
  with support.flags.override(xla_cpu_inline_math=True):
    assert base != program_cache.key(b"code", "mlir", opts, "cpu", True)


def test_no_directory_no_cache():
  assert program_cache.directory() is None
  with support.flags.override(openxla_cpu_compilation_cache_dir="/x"):
    assert program_cache.directory() == os.path.join("/x", "openxla_cpu")
  # A remote store (JAX's cache accepts gs:// paths) is not used.
  with support.flags.override(openxla_cpu_compilation_cache_dir="gs://b/c"):
    assert program_cache.directory() is None


def test_a_damaged_entry_is_ignored(tmp_path):
  key = "k" * 64
  (tmp_path / f"{key}.program").write_text("{not json")
  assert program_cache.lookup(str(tmp_path), key, b"", "mlir") is None
  (tmp_path / f"{key}.program").write_text('{"format": 1}')
  assert program_cache.lookup(str(tmp_path), key, b"", "mlir") is None


def test_an_entry_restores_the_signature(tmp_path):
  program = programs.load(_PROGRAM.encode(), "mlir")
  program_cache.store(str(tmp_path), "k", program, "compiler-key")
  found, compiler_key = program_cache.lookup(str(tmp_path), "k",
                                             program.code, "mlir")
  assert compiler_key == "compiler-key"
  for field in ("name", "entry", "parameters", "results", "aliases",
                "donors", "uses_collectives"):
    assert getattr(found, field) == getattr(program, field), field
  assert found.module is None
  # The module is parsed again when asked for.
  assert found.stablehlo().op.name == program.stablehlo().op.name


def test_the_compile_key_follows_the_program_and_its_configuration():
  base = program_cache.compile_key(b"code", "mlir", (1, 1, None), False)
  assert base == program_cache.compile_key(b"code", "mlir", (1, 1, None),
                                           False)
  assert base != program_cache.compile_key(b"code2", "mlir", (1, 1, None),
                                           False)
  assert base != program_cache.compile_key(b"code", "mlir", (1, 2, None),
                                           False)
  assert base != program_cache.compile_key(b"code", "mlir", (1, 1, None),
                                           True)
  with support.flags.override(xla_cpu_inline_math=True):
    assert base != program_cache.compile_key(b"code", "mlir", (1, 1, None),
                                             False)
