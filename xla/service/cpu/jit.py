"""LLVM JIT for the CPU backend: host target machine, optimization, symbols.

One `CpuJit` owns one MCJIT engine. `compile(module)` verifies and optimizes an
llvmlite `ir.Module` for the host CPU (its name and features, so AVX-512 is
used where the machine has it), adds it to the engine and finalizes it;
`address(name)` then gives a function's entry point for ctypes.
"""

from __future__ import annotations

import functools
import threading

from llvmlite import binding as llvm
from llvmlite import ir

import support
from xla.service.cpu import kernel_api

_INIT_LOCK = threading.Lock()

# LLVM command-line options, set once per process before the first
# optimisation (they are process-wide in llvmlite's LLVM). O3's unroll
# threshold (300) fully unrolls 32-trip loops of vectorized bodies (the
# tiled transposes, dynamic slices and row loops of our kernels) into
# thousands of instructions: the bench's rnn_scan module took 2.1 s in
# LLVM, 0.15 s with these, mlp_train 1.2 s -> 0.43 s, transformer 1.4 s ->
# 0.57 s (no run-time change measured; see cpu_compiler_test's note).
LLVM_OPTIONS = ("-unroll-threshold=100", "-unroll-full-max-count=16")


@functools.lru_cache(maxsize=None)
def _initialize() -> None:
  with _INIT_LOCK:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for option in LLVM_OPTIONS:
      llvm.set_option("xla_cpu", option)


@functools.lru_cache(maxsize=None)
def host_target_info() -> kernel_api.TargetInfo:
  """The host's CPU name and features, and the vector width to aim at."""
  _initialize()
  name = llvm.get_host_cpu_name()
  features = llvm.get_host_cpu_features().flatten()
  if "+avx512f" in features:
    bits = 512
  elif "+avx2" in features or "+avx" in features:
    bits = 256
  else:
    bits = 128
  return kernel_api.TargetInfo(cpu_name=name, features=features,
                               vector_bits=bits)


@functools.lru_cache(maxsize=None)
def _target_machine(opt_level: int):
  return _new_target_machine(opt_level)


def _new_target_machine(opt_level: int):
  """A fresh target machine. An MCJIT engine takes ownership of (and frees)
  the one it is created with, so each engine gets its own, never the cached
  one above."""
  _initialize()
  info = host_target_info()
  target = llvm.Target.from_default_triple()
  return target.create_target_machine(cpu=info.cpu_name,
                                      features=info.features,
                                      opt=opt_level, reloc="default",
                                      codemodel="jitdefault")


def configure_module(module: ir.Module) -> None:
  """Sets the host triple and data layout on a module before emission ends."""
  tm = _target_machine(3)
  module.triple = llvm.get_process_triple()
  module.data_layout = str(tm.target_data)


def optimize(mod: "llvm.ModuleRef", opt_level: int = 3) -> None:
  """Runs LLVM's standard O-level pipeline (with loop and SLP vectorization)."""
  tm = _target_machine(opt_level)
  pto = llvm.create_pipeline_tuning_options(speed_level=opt_level,
                                            size_level=0)
  pto.loop_vectorization = opt_level >= 2
  pto.slp_vectorization = opt_level >= 2
  pto.loop_unrolling = opt_level >= 2
  pb = llvm.create_pass_builder(tm, pto)
  pm = pb.getModulePassManager()
  pm.run(mod, pb)


class CpuJit:
  """Compiles llvmlite modules for the host and hands out function addresses."""

  def __init__(self, opt_level: int = 3):
    _initialize()
    self._opt_level = opt_level
    self._tm = _new_target_machine(opt_level)
    backing = llvm.parse_assembly("")
    self._engine = llvm.create_mcjit_compiler(backing, self._tm)
    self._modules: list = []
    self._lock = threading.Lock()

  def compile(self, module: ir.Module | str) -> "llvm.ModuleRef":
    """Parses, verifies, optimizes and loads `module` (IR object or text)."""
    text = str(module)
    try:
      mod = llvm.parse_assembly(text)
      mod.verify()
    except RuntimeError as e:
      raise support.InternalError(
          f"CPU codegen produced invalid LLVM IR: {e}") from e
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(self._tm.target_data)
    optimize(mod, self._opt_level)
    with self._lock:
      self._engine.add_module(mod)
      self._engine.finalize_object()
      self._engine.run_static_constructors()
      self._modules.append(mod)
    return mod

  def address(self, name: str) -> int:
    addr = self._engine.get_function_address(name)
    if not addr:
      raise support.NotFoundError(f"no compiled function named {name!r}")
    return addr

  def load_object_code(self, data: bytes) -> None:
    """Loads machine code made by `object_code` (e.g. from the disk
    cache) into this engine; its functions are then found by `address`.
    (Added by the core CPU helper for the compilation cache.)"""
    obj = llvm.ObjectFileRef.from_data(bytes(data))
    with self._lock:
      self._engine.add_object_file(obj)
      self._engine.finalize_object()
      self._modules.append(obj)

  def object_code(self, module: ir.Module | str) -> bytes:
    """Machine code for `module` as an object file (for the disk cache)."""
    mod = llvm.parse_assembly(str(module))
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(self._tm.target_data)
    optimize(mod, self._opt_level)
    return self._tm.emit_object(mod)
