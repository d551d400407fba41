"""The registry of PJRT ABI fuzz kinds, and the kinds about the API's shape:
struct sizes, NULLs, deleted objects, lifetimes, Execute arguments, events
and errors. (Kinds about values: abi_fuzz_values.py. What kinds, tiers and
expectations mean: abi_fuzz_cases.py.)
"""

from __future__ import annotations

import ctypes
import dataclasses
import random
from typing import Any, Callable

import numpy as np

import support
from pjrt._src import abi
from pjrt.tools import abi_fuzz_fixture as fixture_lib
from pjrt.tools.abi_fuzz_fixture import Fixture
from pjrt.tools.abi_fuzz_fixture import run_built
from pjrt.tools.abi_fuzz_fixture import Skip
from pjrt.tools.abi_fuzz_fixture import Wrong

CONTRACT = "contract"
HARDENING = "hardening"
OK = "ok"
ERROR = "error"
ANY = "any"


@dataclasses.dataclass(frozen=True)
class Kind:
  """One way of calling the API; see the module docstring."""

  name: str
  tier: str
  expect: str
  run: Callable[[Fixture, dict], Any]
  params: Callable[[random.Random], dict] = lambda rng: {}
  doc: str = ""
  # Times the kind is dealt per round (kinds that walk many slots get more).
  weight: int = 1


KINDS: dict[str, Kind] = {}


def kind(name: str, tier: str, expect: str, doc: str = "",
         params: Callable[[random.Random], dict] | None = None,
         weight: int = 1):
  def register(fn):
    if name in KINDS:
      raise ValueError(f"duplicate fuzz kind {name!r}")
    KINDS[name] = Kind(name, tier, expect, fn,
                       params or (lambda rng: {}), doc, weight)
    return fn
  return register


class _Cycle:
  """Params that walk `slots` in a seeded order: every slot is drawn once
  before any is drawn twice, so N draws of a kind cover min(N, len) slots."""

  def __init__(self, slots):
    self.slots = list(slots)
    self.order: list[str] = []

  def __call__(self, rng: random.Random) -> dict:
    if not self.order:
      self.order = list(self.slots)
      rng.shuffle(self.order)
    return {"slot": self.order.pop()}


def _pick_slot(slots):
  # One walker per generate() call: `generate` resets KIND_STATE.
  key = object()

  def params(rng):
    walker = KIND_STATE.setdefault(key, _Cycle(slots))
    return walker(rng)
  return params


# Per-run state of parameter generators (reset by `generate`).
KIND_STATE: dict[Any, Any] = {}


# -- struct_size. -----------------------------------------------------------

_SIZE_VARIANTS = {
    # (expect, doc, size from the struct's own size)
    "zero": (ERROR, "struct_size 0", lambda n: 0),
    "below_header": (ERROR, "struct_size 8 (less than the 16-byte header)",
                     lambda n: 8),
    "header_only": (ERROR, "struct_size 16 (the header, no fields)",
                    lambda n: 16),
    "one_less": (ANY, "struct_size one byte less than 0.112's (an older "
                 "caller: the plugin may accept it or not)", lambda n: n - 1),
    "larger": (OK, "struct_size 4 KiB larger than 0.112's (a newer caller; "
               "the plugin reads the prefix it knows)", lambda n: n + 4096),
    "max": (ANY, "struct_size SIZE_MAX", lambda n: (1 << 64) - 1),
}


def _struct_size_kind(variant, expect, doc, size_of):
  def run(fx, p):
    slot = p["slot"]
    size = size_of(abi.args_type(slot).STRUCT_SIZE)
    if variant == "one_less" and size < 24:
      raise Skip("struct has a single field")
    if expect != ERROR:
      # Only a call that works with the exact size says anything here.
      try:
        run_built(fx, slot)
      except support.XlaError as e:
        raise Skip(f"fails with the exact struct_size too: {e}") from e

    def mutate(args):
      args.struct_size = size
    return run_built(fx, slot, mutate)
  kind(f"struct_size.{variant}", CONTRACT, expect, doc,
       _pick_slot(fixture_lib.MUTABLE_SLOTS), weight=3)(run)


for _v, (_e, _d, _f) in _SIZE_VARIANTS.items():
  _struct_size_kind(_v, _e, _d, _f)


# -- NULL args pointer and NULL handles (hardening). ------------------------


@kind("null.args_pointer", HARDENING, ERROR, "the args pointer is NULL",
      _pick_slot(fixture_lib.MUTABLE_SLOTS), weight=3)
def _(fx, p):
  fx.call_null(p["slot"])


@kind("null.handle", HARDENING, ERROR,
      "the object field (client, buffer, device, ...) is NULL",
      _pick_slot(fixture_lib.NULL_HANDLE_SLOTS), weight=3)
def _(fx, p):
  field = fixture_lib.handle_field(p["slot"])
  return run_built(fx, p["slot"], lambda args: setattr(args, field, None))


# -- NULL where the header says "can be nullptr" (contract). --------------

_DESTROY_SLOTS = {
    "Error_Destroy": "error", "Event_Destroy": "event",
    "Client_Destroy": "client", "Buffer_Destroy": "buffer",
    "Executable_Destroy": "executable",
    "LoadedExecutable_Destroy": "executable",
    "TopologyDescription_Destroy": "topology",
    "ExecuteContext_Destroy": "context",
    "AsyncHostToDeviceTransferManager_Destroy": "transfer_manager",
    "CopyToDeviceStream_Destroy": "stream",
}


@kind("null_documented.destroy", CONTRACT, OK,
      "a Destroy function with a NULL object (documented as allowed)",
      _pick_slot(sorted(_DESTROY_SLOTS)))
def _(fx, p):
  slot = p["slot"]
  fx.call(slot, fx.args(slot))  # Every field NULL.


@kind("null_documented.to_host_size_query", CONTRACT, OK,
      "Buffer_ToHostBuffer with dst NULL asks for the size")
def _(fx, p):
  del p
  args = fx.args("Buffer_ToHostBuffer", src=fx.buffer.handle)
  fx.call("Buffer_ToHostBuffer", args)
  fx.finish_event(args.event)
  if args.dst_size != 16:
    raise Wrong(f"dst_size {args.dst_size} for an f32[4], expected 16")


@kind("null_documented.execute_without_events", CONTRACT, OK,
      "Execute with device_complete_events NULL")
def _(fx, p):
  del p
  x = fx.buffer.handle
  (outs,) = fx.execute(fx.exe.handle, [[x, x]], events=False)
  got = fx.read_f32(outs[0])
  fx.destroy_buffer(outs[0])
  if got != [2.0] * 4:
    raise Wrong(f"1 + 1 gave {got}")


@kind("null_documented.buffer_to_memory_only", CONTRACT, OK,
      "BufferFromHostBuffer with device NULL and a memory")
def _(fx, p):
  del p
  args = fixture_lib.host_args(fx, device=None, memory=fx.memory())
  fx.call("Client_BufferFromHostBuffer", args)
  got = fx.read_f32(args.buffer)
  fixture_lib.host_cleanup(fx)(args)
  if got != [0.0, 1.0, 2.0, 3.0]:
    raise Wrong(f"read back {got}")


# -- Deleted buffers. -------------------------------------------------------


def _deleted_kind(name, expect, doc, fn):
  def run(fx, p):
    del p
    buffer = fx.deleted_buffer()
    return fn(fx, buffer.handle)
  # The header allows only IsDeleted and Destroy after Delete; everything
  # else is a caller's mistake that a robust plugin reports.
  tier = CONTRACT if name == "is_deleted" else HARDENING
  kind(f"deleted_buffer.{name}", tier, expect, doc)(run)


def _is_deleted(fx, b):
  if not fx.call("Buffer_IsDeleted",
                 fx.args("Buffer_IsDeleted", buffer=b)).is_deleted:
    raise Wrong("IsDeleted is false after Delete")


def _to_host(fx, b):
  return fx.read_f32(b)


def _execute_deleted(fx, b):
  outs = fx.execute(fx.exe.handle, [[fx.buffer.handle, b]])
  for h in outs[0]:
    fx.destroy_buffer(h)


def _copy_to_device(fx, b):
  args = fx.args("Buffer_CopyToDevice", buffer=b,
                 dst_device=fx.devices[-1].handle)
  fx.call("Buffer_CopyToDevice", args)
  fx.destroy_buffer(args.dst_buffer)


def _copy_to_memory(fx, b):
  args = fx.args("Buffer_CopyToMemory", buffer=b, dst_memory=fx.memory())
  fx.call("Buffer_CopyToMemory", args)
  fx.destroy_buffer(args.dst_buffer)


def _ready_event(fx, b):
  event = fx.call("Buffer_ReadyEvent",
                  fx.args("Buffer_ReadyEvent", buffer=b)).event
  try:
    fx.call("Event_Await", fx.args("Event_Await", event=event))
  finally:
    fx.quietly("Event_Destroy", event=event)


def _simple(slot):
  def fn(fx, b):
    fx.call(slot, fx.args(slot, buffer=b))
  return fn


for _name, _expect, _fn in [
    ("is_deleted", OK, _is_deleted),
    ("to_host", ERROR, _to_host),
    ("execute", ERROR, _execute_deleted),
    ("copy_to_device", ERROR, _copy_to_device),
    ("copy_to_memory", ERROR, _copy_to_memory),
    ("ready_event", ANY, _ready_event),
    ("delete_again", ANY, _simple("Buffer_Delete")),
    ("dimensions", ANY, _simple("Buffer_Dimensions")),
    ("element_type", ANY, _simple("Buffer_ElementType")),
    ("on_device_size", ANY, _simple("Buffer_OnDeviceSizeInBytes")),
    ("unsafe_pointer", ANY, _simple("Buffer_UnsafePointer")),
]:
  _deleted_kind(_name, _expect, f"{_name} of a deleted buffer", _fn)


@kind("deleted_buffer.destroy", CONTRACT, OK, "destroy a deleted buffer")
def _(fx, p):
  del p
  buffer = fx.deleted_buffer()
  handle = fixture_lib.disown(buffer)  # Destroyed here, not by `buffer`.
  fx.call("Buffer_Destroy", fx.args("Buffer_Destroy", buffer=handle))


# -- Deleted and destroyed executables. -------------------------------------


def _deleted_exe_kind(name, expect, fn):
  def run(fx, p):
    del p
    exe = fx.fresh_exe()
    fx.call("LoadedExecutable_Delete",
            fx.args("LoadedExecutable_Delete", executable=exe.handle))
    return fn(fx, exe)
  tier = CONTRACT if name == "is_deleted" else HARDENING
  kind(f"deleted_executable.{name}", tier, expect,
       f"{name} of a LoadedExecutable after LoadedExecutable_Delete")(run)


def _exe_is_deleted(fx, exe):
  if not fx.call("LoadedExecutable_IsDeleted",
                 fx.args("LoadedExecutable_IsDeleted",
                         executable=exe.handle)).is_deleted:
    raise Wrong("IsDeleted is false after Delete")


def _exe_execute(fx, exe):
  x = fx.buffer.handle
  for h in fx.execute(exe.handle, [[x, x]])[0]:
    fx.destroy_buffer(h)


def _exe_slot(slot, **fields):
  def fn(fx, exe):
    fx.call(slot, fx.args(slot, executable=exe.handle, **fields))
  return fn


def _exe_view(fx, exe):
  view = fx.call("LoadedExecutable_GetExecutable",
                 fx.args("LoadedExecutable_GetExecutable",
                         loaded_executable=exe.handle)).executable
  try:
    fx.call("Executable_NumOutputs",
            fx.args("Executable_NumOutputs", executable=view))
  finally:
    fx.quietly("Executable_Destroy", executable=view)


for _name, _expect, _fn in [
    ("is_deleted", OK, _exe_is_deleted),
    ("execute", ERROR, _exe_execute),
    ("delete_again", ANY, _exe_slot("LoadedExecutable_Delete")),
    ("addressable_devices", ANY,
     _exe_slot("LoadedExecutable_AddressableDevices")),
    ("executable_view", ANY, _exe_view),
]:
  _deleted_exe_kind(_name, _expect, _fn)


@kind("lifetime.executable_view_destroyed", CONTRACT, OK,
      "destroy the PJRT_Executable from GetExecutable, then run the loaded "
      "executable")
def _(fx, p):
  del p
  exe = fx.fresh_exe()
  view = fx.call("LoadedExecutable_GetExecutable",
                 fx.args("LoadedExecutable_GetExecutable",
                         loaded_executable=exe.handle)).executable
  fx.call("Executable_Destroy", fx.args("Executable_Destroy",
                                        executable=view))
  x = fx.buffer.handle
  (outs,) = fx.execute(exe.handle, [[x, x]])
  got = fx.read_f32(outs[0])
  fx.destroy_buffer(outs[0])
  if got != [2.0] * 4:
    raise Wrong(f"1 + 1 gave {got}")


@kind("lifetime.outputs_outlive_executable", CONTRACT, OK,
      "destroy the LoadedExecutable, then read its output buffer")
def _(fx, p):
  del p
  exe = fx.fresh_exe()
  handle = fixture_lib.disown(exe)
  x = fx.buffer.handle
  (outs,) = fx.execute(handle, [[x, x]])
  fx.call("LoadedExecutable_Destroy",
          fx.args("LoadedExecutable_Destroy", executable=handle))
  got = fx.read_f32(outs[0])
  fx.destroy_buffer(outs[0])
  if got != [2.0] * 4:
    raise Wrong(f"1 + 1 gave {got}")


@kind("lifetime.input_destroyed_after_execute", CONTRACT, OK,
      "destroy an input buffer right after Execute, then read the output")
def _(fx, p):
  del p
  a = fx.new_buffer(value=3)
  handle = fixture_lib.disown(a)
  (outs,) = fx.execute(fx.exe.handle, [[handle, fx.buffer.handle]],
                       events=False)
  fx.destroy_buffer(handle)
  got = fx.read_f32(outs[0])
  fx.destroy_buffer(outs[0])
  if got != [4.0] * 4:
    raise Wrong(f"3 + 1 gave {got}")


# -- Execute with wrong arguments. -------------------------------------------

_WRONG_ARGS = {
    "wrong_shape": ((3,), np.float32),
    "wrong_rank": ((2, 2), np.float32),
    "wrong_dtype_same_size": ((4,), np.int32),
    "wrong_dtype_f64": ((4,), np.float64),
    "wrong_dtype_bf16": ((4,), "bfloat16"),
    "scalar": ((), np.float32),
}


def _wrong_arg_kind(name, shape, dtype):
  def run(fx, p):
    del p
    if dtype == "bfloat16":
      import ml_dtypes  # pylint: disable=g-import-not-at-top
      dt = ml_dtypes.bfloat16
    else:
      dt = dtype
    bad = fx.new_buffer(shape, dt)
    for h in fx.execute(fx.exe.handle, [[fx.buffer.handle, bad.handle]])[0]:
      fx.destroy_buffer(h)
  type_name = "bf16" if dtype == "bfloat16" else np.dtype(dtype).name
  kind(f"execute.{name}", CONTRACT, ERROR,
       f"Execute add(f32[4], f32[4]) with a {type_name}{list(shape)} "
       "argument")(run)


for _name, (_shape, _dtype) in _WRONG_ARGS.items():
  _wrong_arg_kind(_name, _shape, _dtype)


@kind("execute.wrong_num_args", CONTRACT, ERROR,
      "Execute with too few or too many arguments",
      lambda rng: {"num_args": rng.choice([0, 1, 3, 7])})
def _(fx, p):
  x = fx.buffer.handle
  for h in fx.execute(fx.exe.handle, [[x] * p["num_args"]],
                      num_args=p["num_args"])[0]:
    fx.destroy_buffer(h)


@kind("execute.num_devices", CONTRACT, ERROR,
      "Execute a one-device executable with num_devices 0 or 2..4",
      lambda rng: {"num_devices": rng.choice([0, 2, 3, 4])})
def _(fx, p):
  x = fx.buffer.handle
  n = p["num_devices"]
  for outs in fx.execute(fx.exe.handle, [[x, x]] * max(n, 1), num_devices=n):
    for h in outs:
      fx.destroy_buffer(h)


@kind("execute.other_device", CONTRACT, ANY,
      "Execute on another addressable device than compiled for")
def _(fx, p):
  del p
  if len(fx.devices) < 2:
    raise Skip("one addressable device")
  other = fx.devices[1]
  x = fx.new_buffer(device=other)
  for h in fx.execute(fx.exe.handle, [[x.handle, x.handle]],
                      execute_device=other.handle)[0]:
    fx.destroy_buffer(h)


# -- Events and errors. --------------------------------------------------------


@kind("event.await_twice", CONTRACT, OK, "Event_Await on a ready event, twice")
def _(fx, p):
  del p
  event = fx.call("Buffer_ReadyEvent", fx.args(
      "Buffer_ReadyEvent", buffer=fx.buffer.handle)).event
  try:
    for _ in range(2):
      fx.call("Event_Await", fx.args("Event_Await", event=event))
  finally:
    fx.quietly("Event_Destroy", event=event)


@kind("event.on_ready_null_callback", HARDENING, ERROR,
      "Event_OnReady with a NULL callback")
def _(fx, p):
  del p
  event = fx.call("Buffer_ReadyEvent", fx.args(
      "Buffer_ReadyEvent", buffer=fx.buffer.handle)).event
  try:
    fx.call("Event_OnReady", fx.args("Event_OnReady", event=event))
  finally:
    fx.quietly("Event_Destroy", event=event)


@kind("error.code_and_message", CONTRACT, OK,
      "Error_GetCode and Error_Message of a returned error")
def _(fx, p):
  del p
  error = fx.error_object()
  try:
    code = fx.call("Error_GetCode", fx.args("Error_GetCode",
                                            error=error)).code
    message = fx.args("Error_Message", error=error)
    fx.plugin.function("Error_Message")(ctypes.byref(message))
  finally:
    fx.plugin.call("Error_Destroy", error=error)
  if not 0 < code <= 16:
    raise Wrong(f"error code {code} is not an absl status code")
  if not message.message or not message.message_size:
    raise Wrong("the error has no message")


@kind("error.for_each_payload_null_visitor", HARDENING, ERROR,
      "Error_ForEachPayload with a NULL visitor")
def _(fx, p):
  del p
  error = fx.error_object()
  try:
    fx.call("Error_ForEachPayload", fx.args("Error_ForEachPayload",
                                            error=error))
  finally:
    fx.plugin.call("Error_Destroy", error=error)
