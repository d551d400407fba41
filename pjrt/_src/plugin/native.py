"""Native entry points: trampolines that guard a caller's pending exception.

C code may call a plugin function while the calling thread has a Python
exception in flight: jaxlib destroys buffers from deallocators while Python
unwinds an exception. A ctypes callback cannot run Python code in that
state (CPython turns the pending exception into a SystemError, and the
callback's work and the original exception are lost). So every function
the plugin hands to C is a small native trampoline instead:

    gil = PyGILState_Ensure(); PyErr_Fetch(&type, &value, &tb);
    result = <the ctypes thunk>(args...);
    PyErr_Restore(type, value, tb); PyGILState_Release(gil); return result;

The trampolines are LLVM IR compiled in-process with llvmlite (a dependency
of our XLA compiler), all at once on first use. Without llvmlite, or with
OPENXLA_CPU_NATIVE_TRAMPOLINES=0, the ctypes thunks are handed out directly
(correct except in that exceptional situation).

A signature is "<args>><result>" over p (pointer-sized integer), i (C int)
and v (void, results only): "p>p" is `void* f(void*)`.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from pjrt._src.plugin import handles

DISABLE_ENV = "OPENXLA_CPU_NATIVE_TRAMPOLINES"

_lock = threading.Lock()
_pending: dict[str, tuple[Any, str]] = {}
_addresses: dict[str, int] = {}
_engines: list[Any] = []
_enabled: bool | None = None

_LLVM_TYPES = {"p": "i64", "i": "i32", "v": "void"}


def register(name: str, thunk: Any, signature: str) -> None:
  """Declares ctypes thunk `thunk` (kept alive forever) as entry `name`."""
  with _lock:
    if name in _pending or name in _addresses:
      raise ValueError(f"native entry {name!r} registered twice")
    _pending[name] = (handles.immortal(thunk), signature)


def address(name: str) -> int:
  """The address C code should call for entry `name`."""
  address_ = _addresses.get(name)
  if address_ is not None:
    return address_
  with _lock:
    if name not in _addresses:
      if name not in _pending:
        raise KeyError(f"no native entry {name!r}")
      _build_pending()
    return _addresses[name]


def enabled() -> bool:
  """Whether trampolines are in use (llvmlite importable, not disabled)."""
  global _enabled
  if _enabled is None:
    if os.environ.get(DISABLE_ENV, "1") in ("0", "false", "no"):
      _enabled = False
    else:
      try:
        import llvmlite.binding  # pylint: disable=g-import-not-at-top,unused-import
        _enabled = True
      except ImportError:
        _enabled = False
  return _enabled


def _thunk_address(thunk: Any) -> int:
  return ctypes.cast(thunk, ctypes.c_void_p).value


def _build_pending() -> None:
  entries = sorted(_pending.items())
  _pending.clear()
  if not enabled():
    for name, (thunk, _) in entries:
      _addresses[name] = _thunk_address(thunk)
    return
  addresses = _compile([(name, _thunk_address(thunk), signature)
                        for name, (thunk, signature) in entries])
  _addresses.update(addresses)


def _api_address(symbol: str) -> int:
  return ctypes.cast(getattr(ctypes.pythonapi, symbol), ctypes.c_void_p).value


def _function_ir(index: int, inner: int, signature: str) -> str:
  args, result = signature.split(">")
  params = [f"{_LLVM_TYPES[a]} %a{i}" for i, a in enumerate(args)]
  result_type = _LLVM_TYPES[result]
  call = f"call {result_type} %inner({', '.join(params)})"
  lines = [
      f"define {result_type} @trampoline_{index}({', '.join(params)}) {{",
      "entry:",
      "  %t = alloca ptr",
      "  %v = alloca ptr",
      "  %tb = alloca ptr",
      f"  %ensure = inttoptr i64 {_api_address('PyGILState_Ensure')} to ptr",
      "  %gil = call i32 %ensure()",
      f"  %fetch = inttoptr i64 {_api_address('PyErr_Fetch')} to ptr",
      "  call void %fetch(ptr %t, ptr %v, ptr %tb)",
      f"  %inner = inttoptr i64 {inner} to ptr",
      ("  " + call) if result == "v" else f"  %r = {call}",
      "  %t1 = load ptr, ptr %t",
      "  %v1 = load ptr, ptr %v",
      "  %tb1 = load ptr, ptr %tb",
      f"  %restore = inttoptr i64 {_api_address('PyErr_Restore')} to ptr",
      "  call void %restore(ptr %t1, ptr %v1, ptr %tb1)",
      f"  %release = inttoptr i64 {_api_address('PyGILState_Release')} to ptr",
      "  call void %release(i32 %gil)",
      "  ret void" if result == "v" else f"  ret {result_type} %r",
      "}",
  ]
  return "\n".join(lines)


def _compile(entries: list[tuple[str, int, str]]) -> dict[str, int]:
  text = "\n\n".join(_function_ir(i, inner, signature)
                     for i, (_, inner, signature) in enumerate(entries))
  addresses = compile_ir(text, [f"trampoline_{i}"
                                for i in range(len(entries))])
  return {name: addresses[f"trampoline_{i}"]
          for i, (name, _, _) in enumerate(entries)}


def compile_ir(text: str, functions: list[str]) -> dict[str, int]:
  """Compiles LLVM IR `text` in-process (kept forever); returns the
  addresses of `functions`. Needs llvmlite (see `enabled`)."""
  from llvmlite import binding as llvm  # pylint: disable=g-import-not-at-top
  llvm.initialize_native_target()
  llvm.initialize_native_asmprinter()
  module = llvm.parse_assembly(text)
  module.verify()
  target = llvm.Target.from_default_triple()
  machine = target.create_target_machine(opt=1, codemodel="jitdefault")
  module.triple = llvm.get_process_triple()
  module.data_layout = str(machine.target_data)
  engine = llvm.create_mcjit_compiler(module, machine)
  engine.finalize_object()
  _engines.append(handles.immortal(engine))
  return {name: engine.get_function_address(name) for name in functions}
