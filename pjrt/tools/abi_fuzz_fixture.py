"""The fixture of the PJRT ABI fuzz cases, and valid calls to mutate.

`Fixture` holds what a child process of the fuzz run (abi_fuzz.py) works
with: a client of the plugin under test, a live f32[4] buffer and a compiled
`add` of two f32[4], with helpers that call slots raw and clean up after
them. `BUILDERS` make a valid args struct for many slots, so that a case can
break one thing about an otherwise valid call (its struct_size, its object
field, the args pointer itself).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

import pjrt
import support
from pjrt._src import abi

ADD_F32 = """
module @fuzz_add {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
Ptr = ctypes.c_void_p


class Wrong(Exception):
  """A call succeeded but what it returned breaks the API's contract."""


class Skip(Exception):
  """The plugin lacks what the case needs (a slot, a second device)."""


# --------------------------------------------------------------------------
# The fixture: objects the cases use, made once per child process.


class Fixture:
  """A client of the plugin under test and helpers to call it raw."""

  def __init__(self, plugin: pjrt.Plugin):
    self.plugin = plugin
    self.client = pjrt.Client(plugin)
    self.devices = self.client.addressable_devices()
    self.device = self.devices[0]
    self.buffer = self.new_buffer()
    self._exe = None

  # -- Raw calls. --------------------------------------------------------

  def require(self, slot: str) -> None:
    if not self.plugin.has(slot):
      raise Skip(f"the plugin has no PJRT_{slot}")

  def args(self, slot: str, **fields: Any) -> Any:
    return abi.make_args(abi.args_type(slot), **fields)

  def call(self, slot: str, args: Any) -> Any:
    """Calls `slot` with `args`; raises the plugin's error."""
    self.require(slot)
    return self.plugin.call(slot, args)

  def call_null(self, slot: str) -> None:
    """Calls `slot` with a NULL args pointer."""
    self.require(slot)
    error = self.plugin.function(slot)(None)
    if error:
      raise self.plugin.take_error(error)

  def quietly(self, slot: str, **fields: Any) -> None:
    """A clean-up call whose errors do not matter."""
    if not self.plugin.has(slot):
      return
    try:
      self.plugin.call(slot, **fields)
    except support.XlaError:
      pass

  def finish_event(self, event: int | None, check: bool = False) -> None:
    """Awaits and destroys `event`; with `check`, raises its error (an
    asynchronous error is as good as a returned one)."""
    if not event:
      return
    try:
      if check:
        self.call("Event_Await", self.args("Event_Await", event=event))
      else:
        self.quietly("Event_Await", event=event)
    finally:
      self.quietly("Event_Destroy", event=event)

  def destroy_buffer(self, buffer: int | None) -> None:
    if buffer:
      self.quietly("Buffer_Destroy", buffer=buffer)

  # -- Objects. ----------------------------------------------------------

  def new_buffer(self, shape=(4,), dtype=np.float32, device=None,
                 value=1) -> pjrt.Buffer:
    return self.client.buffer_from_numpy(np.full(shape, value, dtype),
                                         device or self.device)

  def deleted_buffer(self) -> pjrt.Buffer:
    buffer = self.new_buffer()
    buffer.delete()
    return buffer

  @property
  def exe(self) -> pjrt.LoadedExecutable:
    """The shared `add` executable (never deleted by a case)."""
    if self._exe is None:
      self._exe = self.fresh_exe()
    return self._exe

  def fresh_exe(self) -> pjrt.LoadedExecutable:
    return self.client.compile(ADD_F32)

  def description(self) -> int:
    return self.device.description

  def memory(self) -> int:
    return self.device.default_memory().handle

  def executable_view(self) -> int:
    return self.plugin.call("LoadedExecutable_GetExecutable",
                            loaded_executable=self.exe.handle).executable

  def error_object(self) -> int:
    """A live PJRT_Error* (from looking up device id -1)."""
    self.require("Client_LookupDevice")
    args = self.args("Client_LookupDevice", client=self.client.handle, id=-1)
    error = self.plugin.function("Client_LookupDevice")(ctypes.byref(args))
    if not error:
      raise Skip("looking up device -1 returned no error to work with")
    return error

  def execute(self, exe: int, arg_lists: list[list[int]], *,
              num_args: int | None = None, num_devices: int | None = None,
              events: bool = True, execute_device: int | None = None,
              options: bool = True) -> list[list[int]]:
    """LoadedExecutable_Execute, raw; returns the output handles.

    The output and event arrays are allocated for 4 outputs per device and
    for max(num_devices, len(arg_lists)) devices, whatever the counts say.
    """
    n_dev = len(arg_lists) if num_devices is None else num_devices
    room = max(1, n_dev, len(arg_lists))
    inner = [(Ptr * max(1, len(a), num_args or 0))(*a) for a in arg_lists]
    inner += [(Ptr * 1)() for _ in range(room - len(inner))]
    outer = (Ptr * room)(*[ctypes.addressof(a) for a in inner])
    outs = [(Ptr * 4)() for _ in range(room)]
    out_outer = (Ptr * room)(*[ctypes.addressof(o) for o in outs])
    event_array = (Ptr * room)()
    fields = dict(
        executable=exe, argument_lists=outer, num_devices=n_dev,
        num_args=len(arg_lists[0]) if num_args is None and arg_lists else (
            num_args or 0),
        output_lists=out_outer,
        device_complete_events=event_array if events else None,
        execute_device=execute_device)
    if options:
      fields["options"] = abi.make_args(abi.PJRT_ExecuteOptions)
    args = self.args("LoadedExecutable_Execute", **fields)
    abi.keep_alive(args, inner, outs, event_array)
    self.call("LoadedExecutable_Execute", args)
    outputs = [[o[i] for i in range(4) if o[i]] for o in outs]
    try:
      for i in range(room):
        self.finish_event(event_array[i], check=True)
    except support.XlaError:
      for handles in outputs:
        for h in handles:
          self.destroy_buffer(h)
      raise
    return outputs

  def read_f32(self, buffer: int, size: int = 4) -> list[float]:
    out = np.zeros(size, np.float32)
    args = self.args("Buffer_ToHostBuffer", src=buffer, dst=out.ctypes.data,
                     dst_size=out.nbytes)
    self.call("Buffer_ToHostBuffer", args)
    self.finish_event(args.event, check=True)
    return out.tolist()


def disown(obj: Any) -> int:
  """The handle of a client-owned Buffer / LoadedExecutable, which will no
  longer destroy it: for cases that destroy the handle themselves."""
  return obj.release()


# --------------------------------------------------------------------------
# Valid calls of many slots, to mutate: slot -> builder(fx) -> (args,
# cleanup(args) run after a successful call). Each needs only the fixture.

Builder = Callable[[Fixture], tuple[Any, Callable[[Any], None] | None]]
BUILDERS: dict[str, Builder] = {}

# The field of each slot's args that holds the object it acts on.
HANDLE_FIELDS = ("client", "device", "device_description", "memory",
                 "buffer", "src", "loaded_executable", "executable", "event",
                 "error")


def _builder(*slots: str):
  def register(fn):
    for slot in slots:
      BUILDERS[slot] = (lambda s: lambda fx: fn(fx, s))(slot)
    return fn
  return register


@_builder("Client_PlatformName", "Client_PlatformVersion",
          "Client_ProcessIndex", "Client_Devices",
          "Client_AddressableDevices", "Client_AddressableMemories")
def _(fx, slot):
  return fx.args(slot, client=fx.client.handle), None


@_builder("Client_LookupDevice")
def _(fx, slot):
  return fx.args(slot, client=fx.client.handle, id=fx.device.id), None


@_builder("Client_LookupAddressableDevice")
def _(fx, slot):
  return fx.args(slot, client=fx.client.handle,
                 local_hardware_id=fx.device.local_hardware_id), None


@_builder("Client_DefaultDeviceAssignment")
def _(fx, slot):
  out = (ctypes.c_int * 4)()
  return fx.args(slot, client=fx.client.handle, num_replicas=1,
                 num_partitions=1, default_assignment_size=1,
                 default_assignment=out), None


# `data` override: point 32 bytes into the 64-byte host array.
MIDDLE = object()


def host_args(fx, **overrides):
  data = np.arange(16, dtype=np.float32)  # Room for any shape used below.
  if overrides.get("data") is MIDDLE:
    overrides["data"] = data.ctypes.data + 32
  fields = dict(
      client=fx.client.handle, data=data.ctypes.data,
      type=abi.BufferType.F32, dims=[4], num_dims=1,
      host_buffer_semantics=abi.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL,
      device=fx.device.handle)
  fields.update(overrides)
  args = fx.args("Client_BufferFromHostBuffer", **fields)
  abi.keep_alive(args, data)
  return args


def ready(fx, buffer: int) -> None:
  """Waits for `buffer`; raises its error (the transfer's)."""
  if buffer and fx.plugin.has("Buffer_ReadyEvent"):
    event = fx.call("Buffer_ReadyEvent", fx.args(
        "Buffer_ReadyEvent", buffer=buffer)).event
    fx.finish_event(event, check=True)


def host_cleanup(fx):
  def cleanup(args):
    fx.finish_event(args.done_with_host_buffer)
    fx.destroy_buffer(args.buffer)
  return cleanup


@_builder("Client_BufferFromHostBuffer")
def _(fx, slot):
  del slot
  return host_args(fx), host_cleanup(fx)


def program(code: bytes, fmt: bytes = b"mlir") -> Any:
  return abi.make_args(abi.PJRT_Program, code=code, code_size=len(code),
                       format=fmt, format_size=len(fmt))


def compile_args(fx, code=ADD_F32.encode(), fmt=b"mlir", options=None):
  options = pjrt.compile_options() if options is None else options
  return fx.args("Client_Compile", client=fx.client.handle,
                 program=program(code, fmt), compile_options=options,
                 compile_options_size=len(options))


def compile_cleanup(fx):
  return lambda args: fx.quietly("LoadedExecutable_Destroy",
                                 executable=args.executable)


@_builder("Client_Compile")
def _(fx, slot):
  del slot
  return compile_args(fx), compile_cleanup(fx)


@_builder("Device_GetDescription", "Device_IsAddressable",
          "Device_LocalHardwareId", "Device_AddressableMemories",
          "Device_DefaultMemory", "Device_MemoryStats")
def _(fx, slot):
  return fx.args(slot, device=fx.device.handle), None


@_builder("DeviceDescription_Id", "DeviceDescription_ProcessIndex",
          "DeviceDescription_Attributes", "DeviceDescription_Kind",
          "DeviceDescription_DebugString", "DeviceDescription_ToString")
def _(fx, slot):
  return fx.args(slot, device_description=fx.description()), None


@_builder("Memory_Id", "Memory_Kind", "Memory_Kind_Id", "Memory_DebugString",
          "Memory_ToString", "Memory_AddressableByDevices")
def _(fx, slot):
  return fx.args(slot, memory=fx.memory()), None


@_builder("Buffer_ElementType", "Buffer_Dimensions",
          "Buffer_UnpaddedDimensions", "Buffer_DynamicDimensionIndices",
          "Buffer_GetMemoryLayout", "Buffer_OnDeviceSizeInBytes",
          "Buffer_IsDeleted", "Buffer_IsOnCpu", "Buffer_Device",
          "Buffer_Memory", "Buffer_UnsafePointer")
def _(fx, slot):
  return fx.args(slot, buffer=fx.buffer.handle), None


@_builder("Buffer_ReadyEvent")
def _(fx, slot):
  return (fx.args(slot, buffer=fx.buffer.handle),
          lambda args: fx.finish_event(args.event))


@_builder("Buffer_Delete")
def _(fx, slot):
  buffer = fx.new_buffer()
  args = fx.args(slot, buffer=buffer.handle)
  abi.keep_alive(args, buffer)
  return args, None


@_builder("Buffer_ToHostBuffer")
def _(fx, slot):
  out = np.zeros(64, np.float32)  # 16x the bytes an f32[4] needs.
  args = fx.args(slot, src=fx.buffer.handle, dst=out.ctypes.data,
                 dst_size=16)
  abi.keep_alive(args, out)
  return args, lambda args: fx.finish_event(args.event)


@_builder("Buffer_CopyToDevice")
def _(fx, slot):
  return (fx.args(slot, buffer=fx.buffer.handle,
                  dst_device=fx.devices[-1].handle),
          lambda args: fx.destroy_buffer(args.dst_buffer))


@_builder("Buffer_CopyToMemory")
def _(fx, slot):
  return (fx.args(slot, buffer=fx.buffer.handle, dst_memory=fx.memory()),
          lambda args: fx.destroy_buffer(args.dst_buffer))


@_builder("Event_IsReady", "Event_Await", "Event_Error")
def _(fx, slot):
  event = fx.plugin.call("Buffer_ReadyEvent",
                         buffer=fx.buffer.handle).event
  fx.plugin.call("Event_Await", event=event)
  return (fx.args(slot, event=event),
          lambda args: fx.quietly("Event_Destroy", event=event))


@_builder("LoadedExecutable_GetExecutable")
def _(fx, slot):
  return (fx.args(slot, loaded_executable=fx.exe.handle),
          lambda args: fx.quietly("Executable_Destroy",
                                  executable=args.executable))


@_builder("LoadedExecutable_AddressableDevices", "LoadedExecutable_IsDeleted",
          "LoadedExecutable_Fingerprint")
def _(fx, slot):
  return fx.args(slot, executable=fx.exe.handle), None


@_builder("LoadedExecutable_GetDeviceAssignment")
def _(fx, slot):
  def cleanup(args):
    if args.serialized_device_assignment_deleter:
      ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
          args.serialized_device_assignment_deleter)(
              args.serialized_device_assignment)
  return fx.args(slot, executable=fx.exe.handle), cleanup


@_builder("LoadedExecutable_Execute")
def _(fx, slot):
  inner = (Ptr * 2)(fx.buffer.handle, fx.buffer.handle)
  outer = (Ptr * 1)(ctypes.addressof(inner))
  outs = (Ptr * 4)()
  out_outer = (Ptr * 1)(ctypes.addressof(outs))
  events = (Ptr * 1)()
  args = fx.args(slot, executable=fx.exe.handle,
                 options=abi.make_args(abi.PJRT_ExecuteOptions),
                 argument_lists=outer, num_devices=1, num_args=2,
                 output_lists=out_outer, device_complete_events=events)
  abi.keep_alive(args, inner, outs)

  def cleanup(args):
    del args
    fx.finish_event(events[0])
    for i in range(4):
      fx.destroy_buffer(outs[i])
  return args, cleanup


def _view_builder(fx, slot, **fields):
  view = fx.executable_view()
  return (fx.args(slot, executable=view, **fields),
          lambda args: fx.quietly("Executable_Destroy", executable=view))


@_builder("Executable_Name", "Executable_NumReplicas",
          "Executable_NumPartitions", "Executable_NumOutputs",
          "Executable_SizeOfGeneratedCodeInBytes", "Executable_Fingerprint",
          "Executable_GetCostAnalysis", "Executable_OutputElementTypes",
          "Executable_OutputDimensions", "Executable_OutputMemoryKinds",
          "Executable_GetCompiledMemoryStats")
def _(fx, slot):
  return _view_builder(fx, slot)


@_builder("Plugin_Attributes")
def _(fx, slot):
  return fx.args(slot), None


@_builder("Error_GetCode")
def _(fx, slot):
  error = fx.error_object()
  return (fx.args(slot, error=error),
          lambda args: fx.plugin.call("Error_Destroy", error=error))


# Slots whose args a mutated struct_size may not reach: void functions
# cannot report an error.
MUTABLE_SLOTS = tuple(sorted(s for s in BUILDERS if s not in abi.VOID_SLOTS))


def handle_field(slot: str) -> str | None:
  """The field of `slot`'s args that holds the object acted on."""
  names = abi.field_names(abi.args_type(slot))
  for name in HANDLE_FIELDS:
    if name in names:
      return name
  return None


NULL_HANDLE_SLOTS = tuple(s for s in MUTABLE_SLOTS
                          if handle_field(s) is not None)


def run_built(fx: Fixture, slot: str,
              mutate: Callable[[Any], None] | None = None) -> Any:
  """Builds valid args for `slot`, applies `mutate`, calls, cleans up."""
  fx.require(slot)
  args, cleanup = BUILDERS[slot](fx)
  if mutate is not None:
    mutate(args)
  fx.call(slot, args)
  if cleanup is not None:
    cleanup(args)
  return "returned"
