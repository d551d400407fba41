"""Tests of backends.py: every backend computes the same results."""

import os

import numpy as np
import pytest

import support
from pjrt._src.plugin import backends
from pjrt._src.plugin import programs
from pjrt._src.plugin import testing

_PROGRAM = """
module @mix {
  func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>)
      -> (tensor<2x2xf32>, tensor<2xf32>) {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
        : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
    %1 = stablehlo.tanh %0 : tensor<2x2xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %zero) applies stablehlo.add
        across dimensions = [1] : (tensor<2x2xf32>, tensor<f32>)
        -> tensor<2xf32>
    return %1, %2 : tensor<2x2xf32>, tensor<2xf32>
  }
}
"""


def _available():
  names = ["interpreter", "evaluator"]
  if backends.cpu_compiler_module() is not None:
    names.append("cpu")
  return names


@pytest.mark.parametrize("backend", _available())
def test_backend_results(backend):
  program = programs.load(_PROGRAM.encode(), "mlir")
  compiled = backends.compile_program(program, backend, fallback=False)
  assert compiled.backend == backend
  rng = np.random.default_rng(1)
  x = rng.standard_normal((2, 3)).astype(np.float32)
  w = rng.standard_normal((3, 2)).astype(np.float32)
  tanh, total = compiled.run([x, w])
  want = np.tanh(x @ w)
  np.testing.assert_allclose(tanh, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(total, want.sum(axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="no cpu compiler")
def test_cpu_executable_keeps_no_hlo_module_nor_program_module():
  # Kept alive, these are tens of thousands of objects per program that
  # every full garbage collection walks; a one-partition program's
  # optimized HLO is never asked for, and its text is printed from a
  # module that is not kept.
  import gc  # pylint: disable=g-import-not-at-top

  def hlo_modules():
    return sum(type(o).__name__ == "HloModule" for o in gc.get_objects())

  gc.collect()
  before = hlo_modules()
  # A program of its own, so that it is compiled, not found in the cache.
  text = _PROGRAM.replace("dense<0.0>", "dense<0.125>")
  program = programs.load(text.encode(), "mlir")
  compiled = backends.compile_program(program, "cpu", fallback=False)
  assert "func.func @main" in program.text()
  assert program.module is None
  gc.collect()
  assert hlo_modules() == before
  assert compiled.run([np.ones((2, 3), np.float32),
                       np.ones((3, 2), np.float32)])[1].shape == (2,)


def test_resolve():
  assert backends.resolve("interpreter") == "interpreter"
  expected = ("cpu" if backends.cpu_compiler_module() is not None
              else "interpreter")
  assert backends.resolve("auto") == expected
  with pytest.raises(support.InvalidArgumentError):
    backends.resolve("tpu")


def test_interpreter_rejects_unknown_ops_at_compile_time():
  # A verified program cannot name an unknown op: rename one afterwards.
  program = programs.load(testing.ADD_F32.encode(), "mlir")
  program.module.functions[0].regions[0].blocks[0].operations[0].name = (
      "stablehlo.no_such_op")
  with pytest.raises(support.UnimplementedError, match="no_such_op"):
    backends.compile_program(program, "interpreter", fallback=False)


def test_fallback_to_the_interpreter():
  calls = []

  def unsupported(program):
    calls.append(program.name)
    raise support.UnimplementedError("not here")

  backends.register("test_unsupported", unsupported)
  program = programs.load(testing.ADD_F32.encode(), "mlir")
  with pytest.raises(support.UnimplementedError):
    backends.compile_program(program, "test_unsupported", fallback=False)
  compiled = backends.compile_program(program, "test_unsupported",
                                      fallback=True)
  assert compiled.backend == "interpreter" and calls == ["add", "add"]
  a = np.arange(4, dtype=np.float32)
  np.testing.assert_array_equal(compiled.run([a, a])[0], 2 * a)


def test_backends_for_several_participants():
  program = programs.load(testing.ALL_REDUCE_2.encode(), "mlir")
  compiled = backends.compile_program(program, "interpreter", fallback=False,
                                      num_replicas=2)
  assert compiled.new_grid(2, 1) is not None
  with pytest.raises(support.UnimplementedError, match="single-device"):
    backends.compile_program(program, "evaluator", fallback=False,
                             num_replicas=2)
  # A backend that takes no participant counts compiles for one only.
  backends.register("test_single", lambda program: None)
  with pytest.raises(support.UnimplementedError, match="several"):
    backends.compile_program(program, "test_single", fallback=False,
                             num_partitions=2)


# f8E4M3FN x f8E5M2 dot_general, as jax.jit lowers
# lax.dot_general(a, b, (([1], [0]), ([], [])), preferred_element_type=T)
# (T = f32, and None, which gives the rhs type f8E5M2).
def _fp8_dot(result: str) -> str:
  return f"""
module @jit__lambda attributes {{mhlo.num_partitions = 1 : i32,
                                 mhlo.num_replicas = 1 : i32}} {{
  func.func public @main(%arg0: tensor<2x3xf8E4M3FN>,
                         %arg1: tensor<3x4xf8E5M2>) -> (tensor<2x4x{result}>) {{
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0],
        precision = [DEFAULT, DEFAULT]
        : (tensor<2x3xf8E4M3FN>, tensor<3x4xf8E5M2>) -> tensor<2x4x{result}>
    return %0 : tensor<2x4x{result}>
  }}
}}
"""


@pytest.mark.parametrize("result", ["f32", "f8E5M2"])
@pytest.mark.parametrize("backend", _available())
def test_mixed_fp8_dot_general(backend, result):
  ml_dtypes = pytest.importorskip("ml_dtypes")
  a = (np.arange(6).reshape(2, 3) / 4).astype(ml_dtypes.float8_e4m3fn)
  b = (np.arange(12).reshape(3, 4) / 8).astype(ml_dtypes.float8_e5m2)
  # Every product and partial sum is exact in f32.
  exact = a.astype(np.float32) @ b.astype(np.float32)
  want = exact if result == "f32" else exact.astype(ml_dtypes.float8_e5m2)
  program = programs.load(_fp8_dot(result).encode(), "mlir")
  if backend == "cpu":
    # Our CPU dot emitter has no fp8 loads yet: a clear error naming it.
    with pytest.raises(support.UnimplementedError, match="f8e"):
      backends.compile_program(program, backend, fallback=False)
    return
  compiled = backends.compile_program(program, backend, fallback=False)
  (got,) = compiled.run([a, b])
  assert got.dtype == want.dtype
  np.testing.assert_array_equal(got.astype(np.float32),
                                want.astype(np.float32))


def test_mixed_fp8_dot_general_matches_jax():
  jax = pytest.importorskip("jax")
  ml_dtypes = pytest.importorskip("ml_dtypes")
  a = (np.arange(6).reshape(2, 3) / 4).astype(ml_dtypes.float8_e4m3fn)
  b = (np.arange(12).reshape(3, 4) / 8).astype(ml_dtypes.float8_e5m2)
  for preferred, result in ((jax.numpy.float32, "f32"), (None, "f8E5M2")):
    fn = lambda x, y, p=preferred: jax.lax.dot_general(
        x, y, (([1], [0]), ([], [])), preferred_element_type=p)
    text = jax.jit(fn).lower(a, b).as_text()
    assert f"-> tensor<2x4x{result}>" in text and "f8E4M3FN" in text
    compiled = backends.compile_program(programs.load(text.encode(), "mlir"),
                                        "interpreter", fallback=False)
    (got,) = compiled.run([a, b])
    want = np.asarray(jax.jit(fn)(a, b))
    np.testing.assert_array_equal(got.astype(np.float32),
                                  want.astype(np.float32))


def test_xla_options_that_are_not_ours_are_ignored_not_errors():
  # XLA accepts every DebugOptions field (JAX's own tests pass GPU and dump
  # options to the CPU client); names that are no XLA option stay errors.
  assert backends.check_option_overrides(
      [("xla_dump_max_hlo_modules", "3"),
       ("xla_gpu_auto_spmd_partitioning_memory_budget_ratio", "0.5")]) == {}
  with pytest.raises(support.InvalidArgumentError,
                     match="No such compile option: 'invalid_key'"):
    backends.check_option_overrides([("invalid_key", "1")])


def test_compile_option_overrides_are_flags():
  assert backends.check_option_overrides(()) == {}
  assert backends.check_option_overrides(
      [("xla_embed_ir_in_executable", "true"),
       ("xla_disable_hlo_passes", "cse")]) == {
           "xla_embed_ir_in_executable": True,
           "xla_disable_hlo_passes": ("cse",)}
  with pytest.raises(support.InvalidArgumentError,
                     match="No such compile option: 'invalid_key'"):
    backends.check_option_overrides([("invalid_key", "invalid_value")])
  with pytest.raises(support.InvalidArgumentError,
                     match="'invalid_value' is not a valid bool value."):
    backends.check_option_overrides(
        [("xla_embed_ir_in_executable", "invalid_value")])


def test_compile_sets_overridden_flags_only_while_compiling():
  program = programs.load(testing.ADD_F32.encode(), "mlir")
  seen = []

  def compile_fn(p):
    seen.append(support.flags.get_flag("xla_embed_ir_in_executable").value)
    return backends.InterpreterCompiled(p)

  backends.register("recording", compile_fn)
  try:
    backends.compile_program(
        program, "recording", fallback=False,
        overrides=[("xla_embed_ir_in_executable", True)])
  finally:
    backends._REGISTRY.pop("recording")
  assert seen == [True]
  assert not support.flags.get_flag("xla_embed_ir_in_executable").value


def test_threads_reach_backends_that_take_them():
  program = programs.load(testing.ADD_F32.encode(), "mlir")
  seen = []

  def with_threads(p, threads=0):
    seen.append(threads)
    return backends.InterpreterCompiled(p)

  def without_threads(p):
    seen.append("none")
    return backends.InterpreterCompiled(p)

  backends.register("test_threads", with_threads)
  backends.register("test_no_threads", without_threads)
  try:
    backends.compile_program(program, "test_threads", fallback=False,
                             threads=3)
    # 0 (one per core) passes nothing: the backend's own default.
    backends.compile_program(program, "test_threads", fallback=False)
    backends.compile_program(program, "test_no_threads", fallback=False,
                             threads=3)
  finally:
    backends._REGISTRY.pop("test_threads")
    backends._REGISTRY.pop("test_no_threads")
  assert seen == [3, 0, "none"]


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="no cpu compiler")
@pytest.mark.parametrize("threads", [0, 1, 2])
def test_cpu_backend_threads(threads):
  program = programs.load(_PROGRAM.encode(), "mlir")
  compiled = backends.compile_program(program, "cpu", fallback=False,
                                      threads=threads)
  want = threads or (os.cpu_count() or 1)
  assert compiled._executable.threads == want
  x = np.ones((2, 3), np.float32)
  w = np.ones((3, 2), np.float32)
  np.testing.assert_allclose(compiled.run([x, w])[0], np.tanh(x @ w),
                             rtol=1e-6)
