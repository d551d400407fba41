"""Library kernels: generic routines compiled once, called by programs.

XLA CPU calls precompiled runtime routines for some operations (its FFT
library, Eigen's matrix multiply, top-k, sort) instead of generating code
for them in every program. The equivalent here are functions written in
LLVM IR whose sizes are run-time arguments (an FFT's length and row width,
for example): a program's kernel only declares the routine and calls it,
so the routine's LLVM time is paid once, not in every program that uses
it.

A routine is defined by a builder registered with `routine(name, type)`,
which adds the function (external linkage) to a module of its own. Kernels
call `declare(module, name)`. When a program's kernels are loaded,
`ensure(names)` makes sure each routine they declare is compiled and its
address known to LLVM's symbol resolver (`kernel_api.register_symbol`).
Routines are compiled at most once per process; their object code is also
kept in a disk cache (jit.cached_object_code), keyed by the routine's
name, the sources that generate it (jit.source_key), the host CPU and the
LLVM version, so a new process loads it without compiling it, or even
generating its IR, again.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Sequence

from llvmlite import ir

import support
from xla.service.cpu import jit as jit_lib
from xla.service.cpu import kernel_api

# Prefix of every routine's symbol.
PREFIX = jit_lib.LIBRARY_PREFIX


@dataclasses.dataclass(frozen=True)
class _Routine:
  name: str
  type: ir.FunctionType
  build: Callable[[ir.Function], None]  # fills in the function's body


_ROUTINES: dict[str, _Routine] = {}
_LOCK = threading.Lock()
_LOADED: dict[str, int] = {}  # name -> address
_JITS: list = []  # keeps the engines holding loaded routines alive


def routine(name: str, fn_type: ir.FunctionType):
  """Registers the decorated `build(fn)` as the body of routine `name`
  (which must start with PREFIX) of type `fn_type`."""
  if not name.startswith(PREFIX):
    raise support.InternalError(f"library routine {name} lacks {PREFIX}")

  def register(build):
    _ROUTINES[name] = _Routine(name, fn_type, build)
    return build
  return register


def is_routine(name: str) -> bool:
  return name in _ROUTINES


def declare(module: ir.Module, name: str) -> ir.Function:
  """The declaration of routine `name` in `module` (made on first use)."""
  fn = module.globals.get(name)
  if fn is None:
    r = _ROUTINES.get(name)
    if r is None:
      raise support.InternalError(f"no library routine {name}")
    fn = ir.Function(module, r.type, name)
  return fn


def host_vector_bits() -> int:
  """The vector width routines aim at (the host's, as kernels do)."""
  return jit_lib.host_target_info().vector_bits


def routine_text(name: str) -> str:
  """The LLVM IR of routine `name` in a module of its own."""
  r = _ROUTINES[name]
  module = ir.Module(name=name)
  jit_lib.configure_module(module)
  fn = ir.Function(module, r.type, name)
  r.build(fn)
  for f in module.functions:
    jit_lib.prefer_wide_vectors(f)
  return str(module)


def ensure(names: Sequence[str]) -> None:
  """Compiles (or loads) the routines among `names` not loaded yet and
  makes their symbols resolvable."""
  wanted = [n for n in dict.fromkeys(names) if n in _ROUTINES]
  with _LOCK:
    missing = [n for n in wanted if n not in _LOADED]
    if not missing:
      return
    # One engine for all of them: an engine costs about a millisecond.
    objects = []
    for name in missing:
      objects.extend(jit_lib.unpack_objects(jit_lib.cached_object_code(
          lambda name=name: routine_text(name), 3, name, by_source=True)))
    engine = jit_lib.CpuJit(3)
    engine.load_object_code(jit_lib.pack_objects(objects), library=True)
    _JITS.append(engine)
    for name in missing:
      address = engine.address(name)
      _LOADED[name] = address
      kernel_api.register_symbol(name, address)


jit_lib.set_library_hook(ensure)
