"""The plugin's `PJRT_Api`: every slot a ctypes callback into Python.

Package layout:
  api.py            this table, the dispatcher, the "pjrt_c_api" capsule
  slots_core.py     Error_*, Plugin_*, Event_*, ExecuteContext_*
  slots_client.py   Client_* (but buffers and compile), Device*, Memory_*,
                    TopologyDescription_*
  slots_buffer.py   Buffer_*, buffer creation by the client
  slots_transfer.py async host-to-device transfers, CopyToDeviceStream_*
  slots_executable.py  compile / load / execute, Executable_*,
                    LoadedExecutable_*, serialization
  slots_layouts.py  the Layouts extension
  cabi.py           reading and writing C data in callbacks
  handles.py, errors.py, events.py   handles, PJRT_Error, PJRT_Event
  runtime.py, programs.py, backends.py, executables.py, serialization.py,
  options.py, topology.py   the Python model behind the slots

The table's `extension_start` chain holds two extensions: Shardings (the
parameter and output shardings of an executable of several partitions,
slots_executable.py) and Layouts (memory layouts of buffers, shapes and
executables, slots_layouts.py); their functions go through the same
dispatcher.

Every slot of API 0.112 is a non-NULL function. A slot's implementation is
registered with `@implements("Client_Create")`; a slot without one returns an
UNIMPLEMENTED error naming it. The dispatcher around every implementation:

  * rejects a NULL args pointer, and an args struct whose `struct_size` is
    below what the implementation reads (INVALID_ARGUMENT): a caller built
    against an incompatible header must not make us read or write past its
    struct;
  * catches every exception and returns it as a PJRT_Error (errors.py), so
    no Python exception ever reaches C;
  * keeps the ctypes thunks alive for the life of the process (a caller may
    call, e.g., PJRT_Buffer_Destroy during interpreter shutdown), and hands
    C a native trampoline around each (native.py) that keeps a Python
    exception the caller has in flight intact.

At interpreter exit (our atexit handler, which runs before JAX's) the
plugin shuts down: from then on every slot answers natively, without the
GIL (cleanup slots succeed, the others fail UNAVAILABLE), and the handler
ends the slot calls still running on threads of the caller's own (e.g. a
compilation on jaxlib's pool, orphaned by a timed-out test) by raising
into them, and waits for them: a caller's thread still inside Python when
finalization starts would be ended by the interpreter, and the pool that
loses it hangs the process when it is destroyed (native.py).

The query slots a framework calls on every dispatch (counts of an
executable, a buffer's device / memory / state / ready event, a memory's
kind, the events of completed work) are handed to C as native fast paths
(native_slots.py) that answer from the handles' mirror records without the
GIL and pass every other case to the Python implementation.
"""

from __future__ import annotations

import atexit
import ctypes
import math
import os
import sys
import threading
import time
from typing import Any, Callable

import support
from pjrt._src import abi
from pjrt._src.plugin import errors
from pjrt._src.plugin import events
from pjrt._src.plugin import handles
from pjrt._src.plugin import native
from pjrt._src.plugin import slot_registry

API_NAME = b"pjrt_c_api"
# "0" keeps every slot in Python (no native fast paths; native_slots.py).
FAST_PATHS_ENV = "OPENXLA_CPU_NATIVE_SLOTS"
# "0" keeps Execute and Buffer_Destroy in Python (native_execute.py).
NATIVE_EXECUTE_ENV = "OPENXLA_CPU_NATIVE_EXECUTE"

# The slot table (name -> (implementation, minimum struct_size)) and the
# decorator that fills it live in the leaf module slot_registry, which the
# slots_* modules import; re-exported here.
_IMPLEMENTATIONS = slot_registry.IMPLEMENTATIONS
implements = slot_registry.implements


def implemented_slots() -> list[str]:
  _load_slots()
  return [s for s in abi.SLOTS if s in _IMPLEMENTATIONS]


def _unimplemented(name: str) -> Callable[[Any], None]:
  def fn(args) -> None:
    del args
    raise support.UnimplementedError(
        f"PJRT_{name} is not implemented by the openxla_cpu plugin")
  return fn


# Set by an atexit handler. Python then clears module globals while C code
# (JAX destroying its clients during the final garbage collection) may
# still call us, so from then on the trampolines answer natively (the
# refusals of _refusal), and a thunk still reached (no native trampolines,
# or a call that passed the gate just before) runs nothing of ours: it
# answers the same from values bound when it was made (see _make_thunk).
_SHUTDOWN = [False]
_SHUTDOWN_MESSAGE = handles.immortal(ctypes.create_string_buffer(
    b"the openxla_cpu plugin is shut down (the Python interpreter exits)"))
# Slots that succeed, doing nothing, after shutdown: releases, and the
# process-info update jaxlib's watcher thread of a multi-process client
# makes until the end (it aborts the process on an error).
_CLEANUP_SUFFIXES = ("_Destroy", "Buffer_Delete", "LoadedExecutable_Delete",
                     "DecreaseExternalReferenceCount",
                     "Client_UpdateGlobalProcessInfo")


# How long the atexit handler waits for slot calls of foreign threads.
EXIT_WAIT_S = 10.0


class PluginShutDown(BaseException):
  """Raised at exit into a slot that a foreign thread is still running.

  A BaseException, so that no `except Exception` on the way swallows it;
  the dispatcher turns it into the slot's error.
  """


def _at_exit() -> None:
  _SHUTDOWN[0] = True
  native.close_gate()
  finish_foreign_calls(EXIT_WAIT_S)


# The code of every thunk (_make_thunk); a thread whose Python stack starts
# with it entered Python through a slot.
_THUNK_CODE: list[Any] = []


def threads_in_slots() -> set[int]:
  """Threads (but the calling one) that entered Python through a slot."""
  me = threading.get_ident()
  found = set()
  # sys._current_frames is CPython's documented (and only) way to see other
  # threads' stacks.
  for ident, frame in sys._current_frames().items():  # pylint: disable=protected-access
    if ident == me:
      continue
    while frame.f_back is not None:
      frame = frame.f_back
    if frame.f_code in _THUNK_CODE:
      found.add(ident)
  return found


def finish_foreign_calls(timeout: float) -> bool:
  """Raises PluginShutDown into the slot calls other threads entered Python
  with, and waits until they and every slot call of a foreign thread have
  returned. Returns whether they did within `timeout` seconds."""
  set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
  set_async_exc.argtypes = [ctypes.c_ulong, ctypes.py_object]
  set_async_exc.restype = ctypes.c_int
  deadline = time.monotonic() + timeout
  interrupted: dict[int, float] = {}  # thread -> when
  while True:
    now = time.monotonic()
    threads = threads_in_slots()
    for ident in threads:
      # Again after a while, should code on the way have swallowed it.
      if now - interrupted.get(ident, -math.inf) >= 1.0:
        set_async_exc(ident, PluginShutDown)
        interrupted[ident] = now
    if not threads and not native.foreign_calls():
      return True
    if now >= deadline:
      return False
    time.sleep(0.002)


def _refusal(name: str) -> native.Refusal:
  """What slot `name` answers natively after shutdown (as the thunk does)."""
  if name == "Error_GetCode":
    args = abi.args_type(name)
    return native.Refusal(stores=((0, args.code.offset, 32,
                                   ("code", 0, args.error.offset)),))
  if name == "Error_Message":
    args = abi.args_type(name)
    return native.Refusal(stores=(
        (0, args.message.offset, 64, "message"),
        (0, args.message_size.offset, 64, "message_size")))
  if name.endswith(_CLEANUP_SUFFIXES) or name.startswith("Error_"):
    return native.NO_RESULT
  return native.Refusal(result="error")


def _make_thunk(name: str, extension: Any = None) -> Any:
  """The ctypes thunk of slot `name`, or of extension function `name`
  when `extension` is its (implementation, minimum struct_size, args
  struct)."""
  if extension is not None:
    fn, required, args_type = extension
    void = cleanup = False
    c_name = f"{name}_Args"
    function_type = abi.extension_function_type(args_type)
  else:
    fn, required = _IMPLEMENTATIONS.get(name, (_unimplemented(name), 0))
    void = name in abi.VOID_SLOTS
    c_name = f"PJRT_{name}_Args"
    cleanup = name.endswith(_CLEANUP_SUFFIXES)
    function_type = abi.function_type(name)

  def thunk(args_p, _shutdown=_SHUTDOWN, _name=name, _cleanup=cleanup,
            _message=ctypes.addressof(_SHUTDOWN_MESSAGE),
            _message_size=len(_SHUTDOWN_MESSAGE.value)):
    if _shutdown[0]:
      # No module globals from here on: only locals and bound defaults.
      if not args_p:
        pass
      elif _name == "Error_GetCode":
        # UNAVAILABLE for the refusal below; other errors' codes are gone.
        args = args_p.contents
        args.code = 14 if args.error == _shutdown[1] else 2
      elif _name == "Error_Message":
        args_p.contents.message = _message
        args_p.contents.message_size = _message_size
      if _cleanup or _name.startswith("Error_"):
        return None
      return _shutdown[1]
    try:
      if not args_p:
        raise support.InvalidArgumentError(f"{c_name} pointer is NULL")
      args = args_p.contents
      size = args.struct_size
      if size < required:
        raise support.InvalidArgumentError(
            f"{c_name}.struct_size is {size}, but PJRT_{name} needs at least "
            f"{required} (the caller was built against an incompatible "
            "pjrt_c_api.h)")
      fn(args)
      return None
    except BaseException as e:  # pylint: disable=broad-except
      if void:
        return None
      try:
        return errors.from_exception(e)
      except BaseException:  # pylint: disable=broad-except
        return errors.FALLBACK

  if not _THUNK_CODE:
    _THUNK_CODE.append(thunk.__code__)
  return function_type(thunk)


def _extension(struct_type: Any, kind: Any, functions: Any) -> Any:
  """A PJRT extension struct of `kind` whose `functions` are registered
  native entry points (filled in by `_fill_extension`)."""
  ext = struct_type()
  ext.base.struct_size = struct_type.STRUCT_SIZE
  ext.base.type = int(kind)
  ext.base.next = None
  for name in functions:
    native.register("extension:" + name,
                    _make_thunk(name, slot_registry.EXTENSION_IMPLEMENTATIONS[
                        name]), "p>p", native.Refusal(result="error"))
  return ext


def _fill_extension(ext: Any, functions: Any) -> None:
  for name in functions:
    setattr(ext, name, native.address("extension:" + name))


def _shardings_extension() -> Any:
  """The plugin's PJRT_Shardings_Extension: parameter and output shardings
  of executables of several partitions."""
  return _extension(abi.PJRT_Shardings_Extension,
                    abi.ExtensionType.SHARDINGS, abi.SHARDINGS_FUNCTIONS)


def _layouts_extension() -> Any:
  """The plugin's PJRT_Layouts_Extension (slots_layouts.py)."""
  return _extension(abi.PJRT_Layouts_Extension, abi.ExtensionType.LAYOUTS,
                    abi.LAYOUTS_FUNCTIONS)


_lock = threading.Lock()
_api: Any = None
_capsule: Any = None


def _load_slots() -> None:
  # pylint: disable=g-import-not-at-top,unused-import
  from pjrt._src.plugin import slots_buffer
  from pjrt._src.plugin import slots_client
  from pjrt._src.plugin import slots_core
  from pjrt._src.plugin import slots_executable
  from pjrt._src.plugin import slots_layouts
  from pjrt._src.plugin import slots_transfer
  # pylint: enable=g-import-not-at-top,unused-import


def get_api() -> Any:
  """The plugin's `PJRT_Api` struct (one per process)."""
  global _api
  with _lock:
    if _api is None:
      _load_slots()
      api = abi.PJRT_Api()
      api.struct_size = abi.PJRT_Api.STRUCT_SIZE
      shardings = handles.immortal(_shardings_extension())
      layouts = handles.immortal(_layouts_extension())
      version = api.pjrt_api_version
      version.struct_size = abi.PJRT_Api_Version.STRUCT_SIZE
      version.extension_start = None
      version.major_version = abi.API_MAJOR
      version.minor_version = abi.API_MINOR
      for name in abi.SLOTS:
        signature = "p>v" if name in abi.VOID_SLOTS else "p>p"
        native.register("slot:" + name, _make_thunk(name), signature,
                        _refusal(name))
      entries = {name: native.address("slot:" + name)
                 for name in abi.SLOTS}
      entries.update(_fast_paths(entries))
      for name in abi.SLOTS:
        setattr(api, "PJRT_" + name, entries[name])
      _fill_extension(shardings, abi.SHARDINGS_FUNCTIONS)
      _fill_extension(layouts, abi.LAYOUTS_FUNCTIONS)
      for name, address in _layouts_fast_paths().items():
        setattr(layouts, name, address)
      # The chain: Shardings, then Layouts.
      shardings.base.next = ctypes.addressof(layouts)
      api.extension_start = ctypes.addressof(shardings)
      errors.FALLBACK = errors.new_permanent_error(
          support.StatusCode.INTERNAL,
          "internal error in the openxla_cpu plugin while reporting an "
          "error")
      _SHUTDOWN.append(errors.new_permanent_error(
          support.StatusCode.UNAVAILABLE, _SHUTDOWN_MESSAGE.value.decode()))
      native.set_refusal(_SHUTDOWN[1], ctypes.addressof(_SHUTDOWN_MESSAGE),
                         len(_SHUTDOWN_MESSAGE.value))
      native.foreign_calls()  # Builds the gate's helpers now, not at exit.
      atexit.register(_at_exit)
      _api = handles.immortal(api)
    return _api


def fast_paths_enabled() -> bool:
  """Whether the query slots get native fast paths (native_slots.py)."""
  return (native.enabled() and os.environ.get(FAST_PATHS_ENV, "1")
          not in ("0", "false", "no"))


def _fast_paths(entries: dict[str, int]) -> dict[str, int]:
  """slot -> native fast path, for the slots native_slots.py answers and
  (unless $OPENXLA_CPU_NATIVE_EXECUTE is 0) native_execute.py's."""
  if not fast_paths_enabled() or not handles.TABLE.region_end:
    return {}
  # pylint: disable-next=g-import-not-at-top
  from pjrt._src.plugin import native_execute, native_slots
  slots = [s for s in native_slots.slots() if s in _IMPLEMENTATIONS]
  fast = native_slots.build(
      {s: entries[s] for s in slots},
      {s: _IMPLEMENTATIONS[s][1] for s in slots}, abi.VOID_SLOTS,
      (handles.TABLE.region_start, handles.TABLE.region_end),
      events.ready_event())
  if os.environ.get(NATIVE_EXECUTE_ENV, "1") not in ("0", "false", "no"):
    slots = [s for s in native_execute.SLOTS if s in _IMPLEMENTATIONS]
    fast.update(native_execute.build(
        {s: entries[s] for s in slots},
        {s: _IMPLEMENTATIONS[s][1] for s in slots}, events.ready_event()))
  return fast


def _layouts_fast_paths() -> dict[str, int]:
  """Layouts extension function -> native fast path (native_slots.py)."""
  if not fast_paths_enabled() or not handles.TABLE.region_end:
    return {}
  # pylint: disable-next=g-import-not-at-top
  from pjrt._src.plugin import native_slots, slots_layouts
  names = list(abi.LAYOUTS_FUNCTIONS)
  return native_slots.build_extension(
      {n: native.address("extension:" + n) for n in names},
      {n: slot_registry.EXTENSION_IMPLEMENTATIONS[n][1] for n in names},
      (handles.TABLE.region_start, handles.TABLE.region_end),
      slots_layouts.static_layouts())


def api_address() -> int:
  return ctypes.addressof(get_api())


def capsule() -> Any:
  """A PyCapsule named "pjrt_c_api" holding `const PJRT_Api*` (for JAX)."""
  global _capsule
  api = get_api()
  with _lock:
    if _capsule is None:
      new = ctypes.pythonapi.PyCapsule_New
      new.restype = ctypes.py_object
      new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
      _capsule = handles.immortal(new(ctypes.addressof(api), API_NAME, None))
    return _capsule
