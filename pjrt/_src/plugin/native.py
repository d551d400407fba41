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
(correct except in that exceptional situation, and at shutdown, below).

Shutdown. Once the interpreter finalizes, a thread other than the main one
that asks for the GIL is ended on the spot (pthread_exit). A thread of a
caller's pool (jaxlib compiles on an Eigen pool) that dies so leaves the
pool one worker short, and the pool's destructor, run by the main thread
during finalization, then waits for it forever. So every trampoline passes
a gate first: once `close_gate()` was called (the plugin's atexit handler),
it answers with its entry's `Refusal` natively, without the GIL. And each
counts the calls it has under way from threads that held no Python thread
state when they called ("foreign" threads, e.g. a pool's), so that the
atexit handler can wait for them to return (`foreign_calls`).

A signature is "<args>><result>" over p (pointer-sized integer), i (C int)
and v (void, results only): "p>p" is `void* f(void*)`.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import support
from pjrt._src.plugin import handles

DISABLE_ENV = "OPENXLA_CPU_NATIVE_TRAMPOLINES"

_lock = threading.Lock()
_pending: dict[str, tuple[Any, str]] = {}
_addresses: dict[str, int] = {}
_engines: list[Any] = []
_enabled: bool | None = None

_LLVM_TYPES = {"p": "i64", "i": "i32", "v": "void"}

# Words every trampoline reads: the gate (nonzero: closed), the count of
# foreign calls under way, and what refusals answer with (set_refusal).
_GATE, _FOREIGN, _ERROR, _MESSAGE, _MESSAGE_SIZE = range(5)
_STATE = handles.immortal((ctypes.c_int64 * 5)())
# The error codes a refusal reports.
UNAVAILABLE = int(support.StatusCode.UNAVAILABLE)
UNKNOWN = int(support.StatusCode.UNKNOWN)


class Refusal:
  """How an entry answers once the gate is closed (no Python runs).

  Values are ints, "error" (the refusal error, a PJRT_Error*), "message" /
  "message_size" (its text, NUL-terminated, and length), or ("code", arg,
  offset): UNAVAILABLE if the word at argument `arg` + `offset` (the
  argument itself when offset is None) is the refusal error, else UNKNOWN.

  Attributes:
    result: the value returned (ignored for a void entry).
    stores: (arg, offset, bits, value) writes to argument `arg` + `offset`
      (a pointer argument; nothing is written through a NULL one).
  """

  def __init__(self, result: Any = 0,
               stores: tuple[tuple[int, int, int, Any], ...] = ()):
    self.result = result
    self.stores = stores


NO_RESULT = Refusal()


def register(name: str, thunk: Any, signature: str,
             refusal: Refusal = NO_RESULT) -> None:
  """Declares ctypes thunk `thunk` (kept alive forever) as entry `name`,
  answering `refusal` once the gate is closed."""
  with _lock:
    if name in _pending or name in _addresses:
      raise ValueError(f"native entry {name!r} registered twice")
    _pending[name] = (handles.immortal(thunk), signature, refusal)


def set_refusal(error: int, message_address: int, message_size: int) -> None:
  """What refusals answer with (the error must never be freed)."""
  _STATE[_ERROR] = error
  _STATE[_MESSAGE] = message_address
  _STATE[_MESSAGE_SIZE] = message_size


def close_gate() -> None:
  """From now on every entry answers its refusal (cannot be undone)."""
  if not enabled():
    _STATE[_GATE] = 1
    return
  _gate_functions()[0]()


def foreign_calls() -> int:
  """Calls under way that foreign threads made through the trampolines."""
  if not enabled():
    return 0
  return _gate_functions()[1]()


_gate: list[Any] = []


def _gate_functions() -> tuple[Any, Any]:
  """(close, count): the gate word is closed with a full barrier, so that a
  thread that counts itself and then finds the gate open is seen by
  a `foreign_calls` that follows `close_gate`."""
  with _lock:
    if not _gate:
      gate = ctypes.addressof(_STATE) + 8 * _GATE
      count = ctypes.addressof(_STATE) + 8 * _FOREIGN
      addresses = compile_ir(f"""
define void @gate_close() {{
entry:
  %p = inttoptr i64 {gate} to ptr
  %old = atomicrmw xchg ptr %p, i64 1 seq_cst
  ret void
}}

define i64 @gate_foreign_calls() {{
entry:
  %p = inttoptr i64 {count} to ptr
  %n = load atomic i64, ptr %p seq_cst, align 8
  ret i64 %n
}}
""", ["gate_close", "gate_foreign_calls"])
      _gate.append((
          ctypes.CFUNCTYPE(None)(addresses["gate_close"]),
          ctypes.CFUNCTYPE(ctypes.c_int64)(addresses["gate_foreign_calls"])))
    return _gate[0]


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
    for name, (thunk, _, _) in entries:
      _addresses[name] = _thunk_address(thunk)
    return
  addresses = _compile([(name, _thunk_address(thunk), signature, refusal)
                        for name, (thunk, signature, refusal) in entries])
  _addresses.update(addresses)


def _api_address(symbol: str) -> int:
  return ctypes.cast(getattr(ctypes.pythonapi, symbol), ctypes.c_void_p).value


class _Text:
  """Lines of one function, with fresh temporaries."""

  def __init__(self):
    self.lines: list[str] = []
    self._n = 0

  def tmp(self) -> str:
    self._n += 1
    return f"%x{self._n}"

  def emit(self, line: str) -> None:
    self.lines.append(("  " + line) if not line.endswith(":") else line)

  def address(self, location: str, offset: int | None = None) -> str:
    """A ptr to `location` (an i64 value) + `offset`."""
    if offset:
      moved = self.tmp()
      self.emit(f"{moved} = add i64 {location}, {offset}")
      location = moved
    pointer = self.tmp()
    self.emit(f"{pointer} = inttoptr i64 {location} to ptr")
    return pointer

  def state(self, word: int) -> str:
    value = self.tmp()
    pointer = self.address(str(ctypes.addressof(_STATE) + 8 * word))
    self.emit(f"{value} = load i64, ptr {pointer}, align 8")
    return value

  def value(self, value: Any) -> str:
    """An i64 holding a Refusal value."""
    if isinstance(value, int):
      return str(value)
    if value == "error":
      return self.state(_ERROR)
    if value == "message":
      return self.state(_MESSAGE)
    if value == "message_size":
      return self.state(_MESSAGE_SIZE)
    _, arg, offset = value
    word = f"%a{arg}"
    if offset is not None:
      word = self.tmp()
      self.emit(f"{word} = load i64, ptr {self.address(f'%a{arg}', offset)}"
                ", align 8")
    same, code = self.tmp(), self.tmp()
    self.emit(f"{same} = icmp eq i64 {word}, {self.state(_ERROR)}")
    self.emit(f"{code} = select i1 {same}, i64 {UNAVAILABLE}, "
              f"i64 {UNKNOWN}")
    return code


def _refusal_ir(text: _Text, signature: str, refusal: Refusal) -> None:
  """The block `refuse:` of a trampoline: the entry's refusal."""
  args, result = signature.split(">")
  text.emit("refuse:")
  by_arg: dict[int, list[tuple[int, int, Any]]] = {}
  for arg, offset, bits, value in refusal.stores:
    if args[arg] != "p":
      raise ValueError(f"refusal stores through non-pointer argument {arg}")
    by_arg.setdefault(arg, []).append((offset, bits, value))
  for n, (arg, stores) in enumerate(sorted(by_arg.items())):
    nonnull = text.tmp()
    text.emit(f"{nonnull} = icmp ne i64 %a{arg}, 0")
    text.emit(f"br i1 {nonnull}, label %store{n}, label %stored{n}")
    text.emit(f"store{n}:")
    for offset, bits, value in stores:
      word = text.value(value)
      if bits != 64:
        narrow = text.tmp()
        text.emit(f"{narrow} = trunc i64 {word} to i{bits}")
        word = narrow
      pointer = text.address(f"%a{arg}", offset)
      text.emit(f"store i{bits} {word}, ptr {pointer}, align {bits // 8}")
    text.emit(f"br label %stored{n}")
    text.emit(f"stored{n}:")
  if result == "v":
    text.emit("ret void")
    return
  word = text.value(refusal.result)
  if result == "i":
    narrow = text.tmp()
    text.emit(f"{narrow} = trunc i64 {word} to i32")
    word = narrow
  text.emit(f"ret {_LLVM_TYPES[result]} {word}")


def _function_ir(index: int, inner: int, signature: str,
                 refusal: Refusal = NO_RESULT) -> str:
  args, result = signature.split(">")
  params = [f"{_LLVM_TYPES[a]} %a{i}" for i, a in enumerate(args)]
  result_type = _LLVM_TYPES[result]
  call = f"call {result_type} %inner({', '.join(params)})"
  gate = ctypes.addressof(_STATE) + 8 * _GATE
  count = ctypes.addressof(_STATE) + 8 * _FOREIGN
  text = _Text()
  text.lines.append(
      f"define {result_type} @trampoline_{index}({', '.join(params)}) {{")
  for line in [
      "entry:",
      "%t = alloca ptr",
      "%v = alloca ptr",
      "%tb = alloca ptr",
      # A foreign thread has no thread state until it asks for the GIL.
      f"%this = inttoptr i64 {_api_address('PyGILState_GetThisThreadState')}"
      " to ptr",
      "%ts = call ptr %this()",
      "%foreign = icmp eq ptr %ts, null",
      "%one = zext i1 %foreign to i64",
      f"%count = inttoptr i64 {count} to ptr",
      "%before = atomicrmw add ptr %count, i64 %one seq_cst",
      f"%gate = inttoptr i64 {gate} to ptr",
      "%closed = load atomic i64, ptr %gate seq_cst, align 8",
      "%open = icmp eq i64 %closed, 0",
      "br i1 %open, label %run, label %closing",
      "closing:",
      "%undo = atomicrmw sub ptr %count, i64 %one seq_cst",
      "br label %refuse",
      "run:",
      f"%ensure = inttoptr i64 {_api_address('PyGILState_Ensure')} to ptr",
      "%gil = call i32 %ensure()",
      f"%fetch = inttoptr i64 {_api_address('PyErr_Fetch')} to ptr",
      "call void %fetch(ptr %t, ptr %v, ptr %tb)",
      f"%inner = inttoptr i64 {inner} to ptr",
      call if result == "v" else f"%r = {call}",
      "%t1 = load ptr, ptr %t",
      "%v1 = load ptr, ptr %v",
      "%tb1 = load ptr, ptr %tb",
      f"%restore = inttoptr i64 {_api_address('PyErr_Restore')} to ptr",
      "call void %restore(ptr %t1, ptr %v1, ptr %tb1)",
      f"%release = inttoptr i64 {_api_address('PyGILState_Release')} to ptr",
      "call void %release(i32 %gil)",
      "%done = atomicrmw sub ptr %count, i64 %one seq_cst",
      "ret void" if result == "v" else f"ret {result_type} %r",
  ]:
    text.emit(line)
  _refusal_ir(text, signature, refusal)
  text.lines.append("}")
  return "\n".join(text.lines)


def _compile(entries: list[tuple[Any, ...]]) -> dict[str, int]:
  """Trampolines for (name, inner address, signature[, refusal])."""
  text = "\n\n".join(_function_ir(i, *entry[1:])
                      for i, entry in enumerate(entries))
  addresses = compile_ir(text, [f"trampoline_{i}"
                                for i in range(len(entries))])
  return {name: addresses[f"trampoline_{i}"]
          for i, (name, *_) in enumerate(entries)}


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
