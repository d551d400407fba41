"""A Pythonic client over any PJRT plugin (a real `.so` or one of ours).

    client = Client("cpu")                 # or Client(plugin), Client(path)
    x = client.buffer_from_numpy(np.ones(4, np.float32))
    exe = client.compile(mlir_text)
    (y,) = exe.execute([x, x])
    y.to_numpy()

Ownership follows the C API: every handle this module receives and owns
(client, buffers, events, executables) is destroyed exactly once, when its
Python object is closed or collected. Children keep their client alive, and
`Client.close()` first destroys the children still alive. Devices and
memories belong to the client and are never destroyed.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import weakref
from typing import Any, Callable, Sequence

import numpy as np

import support
from pjrt._src import abi
from pjrt._src import compile_options as compile_options_lib
from pjrt._src import dtypes
from pjrt._src import loader

_Ptr = ctypes.c_void_p


def _handles(pointer: Any, count: int) -> list[int]:
  return [pointer[i] for i in range(count)]


class _Owned:
  """A plugin object this process owns; `_destroy_slot` frees it once."""

  _destroy_slot = ""
  _destroy_field = ""

  def __init__(self, client: "Client", handle: int):
    self._client = client
    self._handle = handle
    client.own(self)

  @property
  def handle(self) -> int:
    if not self._handle:
      raise support.FailedPreconditionError(
          f"{type(self).__name__} was already destroyed")
    return self._handle

  def release(self) -> int:
    """Gives up ownership: returns the handle, which this object will no
    longer destroy (the caller must)."""
    handle = self.handle
    self._handle = None
    return handle

  def close(self) -> None:
    """Destroys the underlying PJRT object (idempotent)."""
    handle, self._handle = self._handle, None
    if handle and not self._client.closed:
      _destroy(self._client.plugin, self._destroy_slot, handle)

  def __del__(self):
    try:
      self.close()
    except Exception:  # pylint: disable=broad-except
      pass  # Nothing sensible to do in a finalizer.


def _destroy(plugin: loader.Plugin, slot: str, handle: int) -> None:
  """Calls a `*_Destroy` slot, whose args are {struct_size,
  extension_start, handle}: the struct is built directly (this runs for
  every buffer and event)."""
  fn, args_type = plugin.destroyer(slot)
  args = args_type(args_type.STRUCT_SIZE, None, handle)
  if fn is None:
    plugin.call(slot, args)  # Raises UNIMPLEMENTED.
  error = fn(ctypes.byref(args))
  if error:
    raise plugin.take_error(error)


# --------------------------------------------------------------------------
# Events.

# One permanent C thunk serves every Event.on_ready: the plugin may call it
# from any thread (ctypes takes the GIL), and a thunk must never be freed
# while a plugin might still call it.
_on_ready_callbacks: dict[int, tuple[Any, Callable[..., None]]] = {}
_on_ready_ids = itertools.count(1)
_on_ready_lock = threading.Lock()


def _on_ready_trampoline(error: int, user_arg: int) -> None:
  with _on_ready_lock:
    event, callback = _on_ready_callbacks.pop(user_arg, (None, None))
  if event is None:
    return
  try:
    exc = event.plugin.take_error(error) if error else None
    callback(exc)
  except Exception:  # pylint: disable=broad-except
    pass  # Must not unwind into the plugin.


_ON_READY_THUNK = abi.EVENT_ON_READY_CALLBACK(_on_ready_trampoline)

_C_INT_MIN, _C_INT_MAX = -(1 << 31), (1 << 31) - 1
# Upper bound on replicas x partitions accepted before asking the plugin:
# the result buffer is allocated here, so a huge product must not reach it.
_MAX_ASSIGNMENT = 1 << 20


class Event:
  """A PJRT_Event: completion of asynchronous work, with an error or not."""

  def __init__(self, plugin: loader.Plugin, handle: int):
    self.plugin = plugin
    self._handle = handle

  def is_ready(self) -> bool:
    return bool(self.plugin.call("Event_IsReady",
                                 event=self._handle).is_ready)

  def wait(self) -> None:
    """Blocks until ready; raises the event's error, if any."""
    self.plugin.call("Event_Await", event=self._handle)

  def error(self) -> support.XlaError | None:
    """Blocks until ready; returns the event's error (PJRT_Event_Error)."""
    if not self.is_ready():
      try:
        self.wait()
      except support.XlaError:
        pass  # Reported below, by Event_Error.
    try:
      self.plugin.call("Event_Error", event=self._handle)
    except support.XlaError as e:
      return e
    return None

  def on_ready(self, callback: Callable[[support.XlaError | None],
                                        None]) -> None:
    """Calls `callback(error_or_None)` once ready, maybe on another thread."""
    key = next(_on_ready_ids)
    with _on_ready_lock:
      _on_ready_callbacks[key] = (self, callback)
    try:
      self.plugin.call("Event_OnReady", event=self._handle,
                       callback=_ON_READY_THUNK, user_arg=key)
    except Exception:
      with _on_ready_lock:
        _on_ready_callbacks.pop(key, None)
      raise

  def close(self) -> None:
    handle, self._handle = self._handle, None
    if handle:
      _destroy(self.plugin, "Event_Destroy", handle)

  def __del__(self):
    try:
      self.close()
    except Exception:  # pylint: disable=broad-except
      pass


def _take_event(plugin: loader.Plugin, handle: int | None) -> Event | None:
  return Event(plugin, handle) if handle else None


# --------------------------------------------------------------------------
# Devices and memories (owned by the client, never destroyed).


class Device:
  """A PJRT_Device and its PJRT_DeviceDescription."""

  def __init__(self, client: "Client", handle: int):
    self.client = client
    self.handle = handle
    self._description = None

  def _call(self, slot: str, **fields: Any) -> Any:
    return self.client.plugin.call(slot, **fields)

  @property
  def description(self) -> int:
    if self._description is None:
      self._description = self._call(
          "Device_GetDescription", device=self.handle).device_description
    return self._description

  def _describe(self, slot: str) -> Any:
    return self._call(slot, device_description=self.description)

  @property
  def id(self) -> int:
    return self._describe("DeviceDescription_Id").id

  @property
  def process_index(self) -> int:
    return self._describe("DeviceDescription_ProcessIndex").process_index

  @property
  def kind(self) -> str:
    args = self._describe("DeviceDescription_Kind")
    return loader.read_string(args.device_kind, args.device_kind_size)

  @property
  def debug_string(self) -> str:
    args = self._describe("DeviceDescription_DebugString")
    return loader.read_string(args.debug_string, args.debug_string_size)

  def to_string(self) -> str:
    args = self._describe("DeviceDescription_ToString")
    return loader.read_string(args.to_string, args.to_string_size)

  @property
  def attributes(self) -> dict[str, Any]:
    args = self._describe("DeviceDescription_Attributes")
    return loader.decode_named_values(args.attributes, args.num_attributes)

  @property
  def local_hardware_id(self) -> int:
    return self._call("Device_LocalHardwareId",
                      device=self.handle).local_hardware_id

  @property
  def is_addressable(self) -> bool:
    return bool(self._call("Device_IsAddressable",
                           device=self.handle).is_addressable)

  def memories(self) -> list["Memory"]:
    args = self._call("Device_AddressableMemories", device=self.handle)
    return [self.client.memory_from_handle(h)
            for h in _handles(args.memories, args.num_memories)]

  def default_memory(self) -> "Memory":
    return self.client.memory_from_handle(
        self._call("Device_DefaultMemory", device=self.handle).memory)

  def __eq__(self, other: Any) -> bool:
    return isinstance(other, Device) and other.handle == self.handle

  def __hash__(self) -> int:
    return hash(self.handle)

  def __repr__(self) -> str:
    try:
      return self.to_string()
    except support.XlaError:
      return f"<Device {self.handle:#x}>"


class Memory:
  """A PJRT_Memory: a memory space such as "device" or "pinned_host"."""

  def __init__(self, client: "Client", handle: int):
    self.client = client
    self.handle = handle

  def _call(self, slot: str) -> Any:
    return self.client.plugin.call(slot, memory=self.handle)

  @property
  def id(self) -> int:
    return self._call("Memory_Id").id

  @property
  def kind(self) -> str:
    args = self._call("Memory_Kind")
    return loader.read_string(args.kind, args.kind_size)

  @property
  def kind_id(self) -> int:
    return self._call("Memory_Kind_Id").kind_id

  @property
  def debug_string(self) -> str:
    args = self._call("Memory_DebugString")
    return loader.read_string(args.debug_string, args.debug_string_size)

  def to_string(self) -> str:
    args = self._call("Memory_ToString")
    return loader.read_string(args.to_string, args.to_string_size)

  def addressable_by_devices(self) -> list[Device]:
    args = self._call("Memory_AddressableByDevices")
    return [self.client.device_from_handle(h)
            for h in _handles(args.devices, args.num_devices)]

  def __eq__(self, other: Any) -> bool:
    return isinstance(other, Memory) and other.handle == self.handle

  def __hash__(self) -> int:
    return hash(self.handle)

  def __repr__(self) -> str:
    try:
      return self.to_string()
    except support.XlaError:
      return f"<Memory {self.handle:#x}>"


# --------------------------------------------------------------------------
# Buffers.


class Buffer(_Owned):
  """A PJRT_Buffer: an array on a device."""

  _destroy_slot = "Buffer_Destroy"
  _destroy_field = "buffer"

  def _call(self, slot: str, **fields: Any) -> Any:
    return self._client.plugin.call(slot, buffer=self.handle, **fields)

  @property
  def client(self) -> "Client":
    return self._client

  # A buffer's type and shape never change: each is asked for once.
  _element_type: abi.BufferType | None = None
  _shape: tuple[int, ...] | None = None

  @property
  def element_type(self) -> abi.BufferType:
    element_type = self._element_type
    if element_type is None or not self._handle:
      element_type = self._element_type = abi.BufferType(
          self._call("Buffer_ElementType").type)
    return element_type

  @property
  def dtype(self) -> np.dtype:
    return dtypes.numpy_dtype(self.element_type)

  @property
  def shape(self) -> tuple[int, ...]:
    shape = self._shape
    if shape is None or not self._handle:
      args = self._call("Buffer_Dimensions")
      shape = self._shape = tuple(args.dims[i] for i in range(args.num_dims))
    return shape

  @property
  def on_device_size_in_bytes(self) -> int:
    return self._call("Buffer_OnDeviceSizeInBytes").on_device_size_in_bytes

  @property
  def device(self) -> Device:
    return self._client.device_from_handle(
        self._call("Buffer_Device").device)

  @property
  def memory(self) -> Memory:
    return self._client.memory_from_handle(
        self._call("Buffer_Memory").memory)

  @property
  def is_on_cpu(self) -> bool:
    return bool(self._call("Buffer_IsOnCpu").is_on_cpu)

  def delete(self) -> None:
    """Frees the device memory; the handle stays valid (`is_deleted`)."""
    self._call("Buffer_Delete")

  @property
  def is_deleted(self) -> bool:
    return bool(self._call("Buffer_IsDeleted").is_deleted)

  def ready(self) -> Event:
    """An event that fires when the buffer's data is ready (or failed)."""
    return Event(self._client.plugin, self._call("Buffer_ReadyEvent").event)

  def block_until_ready(self) -> "Buffer":
    self.ready().wait()
    return self

  def to_numpy(self) -> np.ndarray:
    """Copies the buffer to a new host array (dense, row-major)."""
    dtype = self.dtype
    out = np.empty(self.shape, dtype)
    if self.element_type in dtypes.SUB_BYTE:
      # Ask the plugin for the size it will write, and refuse a mismatch
      # rather than let it write past `out` (sub-byte types may be packed;
      # other types are dense, dst_size bounds the write).
      size_args = abi.make_args(abi.PJRT_Buffer_ToHostBuffer_Args,
                                src=self.handle)
      self._client.plugin.call("Buffer_ToHostBuffer", size_args)
      _take_event(self._client.plugin, size_args.event)
      if size_args.dst_size != out.nbytes:
        raise support.UnimplementedError(
            f"buffer of {self.element_type.name}{list(self.shape)} needs "
            f"{size_args.dst_size} host bytes, numpy uses {out.nbytes}")
    args = abi.make_args(abi.PJRT_Buffer_ToHostBuffer_Args, src=self.handle,
                         dst=out.ctypes.data, dst_size=out.nbytes)
    self._client.plugin.call("Buffer_ToHostBuffer", args)
    event = _take_event(self._client.plugin, args.event)
    if event is not None:
      event.wait()
      event.close()
    return out

  def __repr__(self) -> str:
    if not self._handle:
      return "<Buffer destroyed>"
    try:
      return f"<Buffer {self.element_type.name}{list(self.shape)}>"
    except support.XlaError:
      return "<Buffer>"


# --------------------------------------------------------------------------
# Executables.


class LoadedExecutable(_Owned):
  """A PJRT_LoadedExecutable: compiled and loaded onto devices."""

  _destroy_slot = "LoadedExecutable_Destroy"
  _destroy_field = "executable"

  def _call(self, slot: str, **fields: Any) -> Any:
    return self._client.plugin.call(slot, executable=self.handle, **fields)

  def _executable_call(self, slot: str, read: Callable[[Any], Any]) -> Any:
    """Calls a PJRT_Executable_* slot on this executable's PJRT_Executable.

    Outputs of such calls point into the PJRT_Executable, which is destroyed
    on return, so `read` extracts them from the args struct first.
    """
    plugin = self._client.plugin
    exe = plugin.call("LoadedExecutable_GetExecutable",
                      loaded_executable=self.handle).executable
    try:
      return read(plugin.call(slot, executable=exe))
    finally:
      plugin.call("Executable_Destroy", executable=exe)

  @property
  def name(self) -> str:
    return self._executable_call(
        "Executable_Name", lambda a: loader.read_string(
            a.executable_name, a.executable_name_size))

  @property
  def num_replicas(self) -> int:
    return self._executable_call("Executable_NumReplicas",
                                 lambda a: a.num_replicas)

  @property
  def num_partitions(self) -> int:
    return self._executable_call("Executable_NumPartitions",
                                 lambda a: a.num_partitions)

  @property
  def num_outputs(self) -> int:
    """The number of outputs (asked once: it never changes)."""
    count = self._num_outputs
    if count is None:
      count = self._num_outputs = self._executable_call(
          "Executable_NumOutputs", lambda a: a.num_outputs)
    return count

  _num_outputs: int | None = None
  # (num_devices, num_args) -> idle _ExecutePlans (see execute_sharded).
  _plans: dict[tuple[int, int], list["_ExecutePlan"]] | None = None

  def output_element_types(self) -> list[abi.BufferType]:
    return self._executable_call(
        "Executable_OutputElementTypes",
        lambda a: [abi.BufferType(a.output_types[i])
                   for i in range(a.num_output_types)])

  def output_shapes(self) -> list[tuple[int, ...]]:
    def read(a):
      shapes, start = [], 0
      for i in range(a.num_outputs):
        rank = a.dim_sizes[i]
        shapes.append(tuple(a.dims[start + j] for j in range(rank)))
        start += rank
      return shapes
    return self._executable_call("Executable_OutputDimensions", read)

  @property
  def fingerprint(self) -> bytes:
    """The plugin's fingerprint of the executable (may be empty)."""
    def read(a):
      if not a.executable_fingerprint:
        return b""
      return ctypes.string_at(a.executable_fingerprint,
                              a.executable_fingerprint_size)
    if self._client.plugin.has("Executable_Fingerprint"):
      return self._executable_call("Executable_Fingerprint", read)
    # The deprecated slot of older plugins.
    return read(self._call("LoadedExecutable_Fingerprint"))

  def addressable_devices(self) -> list[Device]:
    args = self._call("LoadedExecutable_AddressableDevices")
    return [self._client.device_from_handle(h)
            for h in _handles(args.addressable_devices,
                              args.num_addressable_devices)]

  def device_assignment(self) -> list[list[int]]:
    """Device ids indexed [replica][partition]."""
    args = self._call("LoadedExecutable_GetDeviceAssignment")
    try:
      data = ctypes.string_at(args.serialized_bytes,
                              args.serialized_bytes_size)
    finally:
      if args.serialized_device_assignment_deleter:
        deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            args.serialized_device_assignment_deleter)
        deleter(args.serialized_device_assignment)
    return compile_options_lib.decode_device_assignment(data)

  def delete(self) -> None:
    self._call("LoadedExecutable_Delete")

  @property
  def is_deleted(self) -> bool:
    return bool(self._call("LoadedExecutable_IsDeleted").is_deleted)

  def execute(self, arguments: Sequence[Buffer], *,
              device: Device | None = None) -> list[Buffer]:
    """Runs on one device; returns the outputs once execution completed.

    Args:
      arguments: one buffer per parameter.
      device: run on this device (only for executables compiled for one
        device); None runs where the executable was compiled for.

    Raises:
      support.XlaError: the plugin's error (e.g. INVALID_ARGUMENT for a
        wrong number or shape of arguments).
    """
    return self.execute_sharded([arguments], device=device)[0]

  def execute_sharded(self, argument_lists: Sequence[Sequence[Buffer]], *,
                      device: Device | None = None,
                      launch_id: int = 0) -> list[list[Buffer]]:
    """Runs on `len(argument_lists)` devices; outputs indexed [device][i]."""
    num_devices = len(argument_lists)
    num_args = len(argument_lists[0]) if num_devices else 0
    if any(len(a) != num_args for a in argument_lists):
      raise support.InvalidArgumentError(
          "every device needs the same number of arguments")
    if num_devices == 0:
      # The plugin reports the error (no plan for an empty launch).
      return self._execute_unplanned(argument_lists, device, launch_id)
    handles = [b.handle for a in argument_lists for b in a]
    plugin = self._client.plugin
    key = (num_devices, num_args)
    if self._plans is None:
      self._plans = {}
    idle = self._plans.setdefault(key, [])
    try:
      plan = idle.pop()  # Atomic: each thread gets its own plan.
    except IndexError:
      plan = _ExecutePlan(plugin, self.handle, num_devices, num_args,
                          self.num_outputs)
    try:
      outputs, events = plan.run(
          handles, device.handle if device is not None else None,
          launch_id)
      client = self._client
      num_outputs = plan.num_outputs
      results = [[Buffer(client, outputs[d * num_outputs + i])
                  for i in range(num_outputs)] for d in range(num_devices)]
      plan.finish(events)
    finally:
      idle.append(plan)
    return results

  def _execute_unplanned(self, argument_lists, device, launch_id):
    args = abi.make_args(
        abi.PJRT_LoadedExecutable_Execute_Args, executable=self.handle,
        options=abi.make_args(abi.PJRT_ExecuteOptions, launch_id=launch_id),
        num_devices=len(argument_lists), num_args=0,
        execute_device=device.handle if device is not None else None)
    self._client.plugin.call("LoadedExecutable_Execute", args)
    return []


class _ExecutePlan:
  """The C structs of one Execute call shape, built once and reused.

  One thread uses a plan at a time (LoadedExecutable keeps a pool of idle
  plans). A call makes 1 + 2 * num_devices C calls: Execute, then Await
  and Destroy of each completion event.
  """

  def __init__(self, plugin: loader.Plugin, executable: int,
               num_devices: int, num_args: int, num_outputs: int):
    self.plugin = plugin
    self.num_outputs = num_outputs
    self._execute = plugin.function("LoadedExecutable_Execute")
    if self._execute is None:
      plugin.call("LoadedExecutable_Execute")  # Raises UNIMPLEMENTED.
    self._await = plugin.function("Event_Await")
    self._event_destroy = plugin.function("Event_Destroy")
    # Arguments and outputs of all devices, each device's list contiguous.
    self._arguments = (_Ptr * max(1, num_devices * num_args))()
    self._outputs = (_Ptr * max(1, num_devices * num_outputs))()
    size = ctypes.sizeof(_Ptr)
    base = ctypes.addressof(self._arguments)
    self._argument_lists = (_Ptr * num_devices)(
        *[base + d * num_args * size for d in range(num_devices)])
    base = ctypes.addressof(self._outputs)
    self._output_lists = (_Ptr * num_devices)(
        *[base + d * num_outputs * size for d in range(num_devices)])
    self._events = (_Ptr * num_devices)()
    self._options = abi.make_args(abi.PJRT_ExecuteOptions)
    self._args = abi.make_args(
        abi.PJRT_LoadedExecutable_Execute_Args, executable=executable,
        options=self._options, argument_lists=self._argument_lists,
        num_devices=num_devices, num_args=num_args,
        output_lists=self._output_lists,
        device_complete_events=self._events)
    self._args_p = ctypes.byref(self._args)
    self._event_args = abi.make_args(abi.PJRT_Event_Await_Args)
    self._event_args_p = ctypes.byref(self._event_args)
    self._destroy_args = abi.make_args(abi.PJRT_Event_Destroy_Args)
    self._destroy_args_p = ctypes.byref(self._destroy_args)
    self._num_devices = num_devices

  def run(self, handles: list[int], execute_device: int | None,
          launch_id: int) -> tuple[list[int], list[int]]:
    """Calls Execute; returns (output handles, completion event handles)."""
    if handles:
      self._arguments[:len(handles)] = handles
    self._outputs[:] = [None] * len(self._outputs)
    self._events[:] = [None] * self._num_devices
    self._options.launch_id = launch_id
    self._args.execute_device = execute_device
    error = self._execute(self._args_p)
    if error:
      raise self.plugin.take_error(error)
    return list(self._outputs), list(self._events)

  def finish(self, events: list[int]) -> None:
    """Awaits and destroys the completion events; raises the first error."""
    first = None
    for event in events:
      if not event:
        continue
      self._event_args.event = event
      error = self._await(self._event_args_p)
      if error and first is None:
        first = self.plugin.take_error(error)
      elif error:
        self.plugin.take_error(error)
      self._destroy_args.event = event
      error = self._event_destroy(self._destroy_args_p)
      if error:
        self.plugin.take_error(error)
    if first is not None:
      raise first


# --------------------------------------------------------------------------
# Client.



# Protobuf message names (xla/service/hlo.proto, xla/xla.proto) -> format.
_HLO_MESSAGE_FORMATS = {"xla.HloModuleProto": "hlo",
                        "xla.HloModuleProtoWithConfig": "hlo_with_config"}


def program_bytes(program: Any, fmt: str | None = None) -> tuple[bytes, str]:
  """The PJRT_Program code and format of `program` (see Client.compile;
  an explicit `fmt`, even an empty one, is passed on as given)."""
  def given_or(default: str) -> str:
    return default if fmt is None else fmt

  if isinstance(program, str):
    return program.encode("utf-8"), given_or("mlir")
  if isinstance(program, (bytes, bytearray, memoryview)):
    return bytes(program), given_or("mlir")
  serialize_hlo = getattr(program, "as_serialized_hlo_module_proto", None)
  if callable(serialize_hlo):
    return bytes(serialize_hlo()), given_or("hlo")
  descriptor = getattr(program, "DESCRIPTOR", None)
  message = getattr(descriptor, "full_name", None)
  if message is not None and callable(
      getattr(program, "SerializeToString", None)):
    if fmt is None and message not in _HLO_MESSAGE_FORMATS:
      raise support.InvalidArgumentError(
          f"cannot compile a {message} protobuf message (HloModuleProto "
          "or HloModuleProtoWithConfig expected)")
    return program.SerializeToString(), given_or(
        _HLO_MESSAGE_FORMATS.get(message, ""))
  # Imported here: the StableHLO IR is only needed for a parsed module.
  from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
  from stablehlo import ir as core  # pylint: disable=g-import-not-at-top
  if isinstance(program, core.Module):
    return mlir_text.print_module(program).encode("utf-8"), given_or("mlir")
  raise support.InvalidArgumentError(
      f"cannot compile a {type(program).__name__}: pass MLIR text, a "
      "portable artifact, a StableHLO module, or an HLO module proto")


_KV_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_KV_VALUE_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_KV_CALLBACK_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int,
                                      ctypes.c_void_p, ctypes.c_size_t)


class _KeyValueCallbacks:
  """PJRT_Client_Create's key-value store callbacks over a Python store
  (`get(key, timeout_s) -> bytes`, `put(key, value)`; a support error's
  code is the callback's error code), as a distributed runtime passes
  them."""

  def __init__(self, store: Any):
    self._store = store
    self._values: dict[int, Any] = {}
    self._lock = threading.Lock()
    self.get = _KV_CALLBACK(self._get)
    self.try_get = _KV_CALLBACK(self._try_get)
    self.put = _KV_CALLBACK(self._put)
    self._deleter = _KV_VALUE_DELETER(self._delete)

  def fields(self) -> dict[str, Any]:
    address = lambda thunk: ctypes.cast(thunk, ctypes.c_void_p).value
    return {"kv_get_callback": address(self.get),
            "kv_try_get_callback": address(self.try_get),
            "kv_put_callback": address(self.put)}

  @staticmethod
  def _error(args: Any, exc: BaseException) -> int:
    code = (int(exc.code) if isinstance(exc, support.XlaError)
            else int(support.StatusCode.INTERNAL))
    message = str(exc).encode("utf-8", errors="replace")
    report = _KV_CALLBACK_ERROR(
        ctypes.c_void_p.from_address(args.callback_error).value)
    return report(code, message, len(message)) or 0

  def _give(self, args: Any, value: bytes) -> None:
    buf = ctypes.create_string_buffer(bytes(value), len(value) + 1)
    address = ctypes.addressof(buf)
    with self._lock:
      self._values[address] = buf
    args.value = address
    args.value_size = len(value)
    args.value_deleter_callback = ctypes.cast(self._deleter,
                                              ctypes.c_void_p).value

  def _delete(self, address: int) -> None:
    with self._lock:
      self._values.pop(address, None)

  def _get(self, address: int) -> int:
    args = abi.args_type("KeyValueGetCallback").from_address(address)
    try:
      key = loader.read_string(args.key, args.key_size)
      self._give(args, self._store.get(key, args.timeout_in_ms / 1000))
      return 0
    except BaseException as e:  # pylint: disable=broad-except
      return self._error(args, e)

  def _try_get(self, address: int) -> int:
    args = abi.args_type("KeyValueTryGetCallback").from_address(address)
    try:
      key = loader.read_string(args.key, args.key_size)
      self._give(args, self._store.get(key, 0.0))
      return 0
    except BaseException as e:  # pylint: disable=broad-except
      return self._error(args, e)

  def _put(self, address: int) -> int:
    args = abi.args_type("KeyValuePutCallback").from_address(address)
    try:
      key = loader.read_string(args.key, args.key_size)
      self._store.put(key, ctypes.string_at(args.value, args.value_size)
                      if args.value_size else b"")
      return 0
    except BaseException as e:  # pylint: disable=broad-except
      return self._error(args, e)


class Client:
  """A PJRT_Client of a plugin.

  Args:
    plugin: a `loader.Plugin`, a registered plugin name, or anything
      `loader.load_plugin` accepts (e.g. a library path).
    options: client create options: {name: str | int | float | bool |
      list[int]}, passed as PJRT_NamedValues.
    kv_store: a key-value store shared by the processes of a
      multi-process client (`get(key, timeout_s) -> bytes`, blocking until
      the key is put or the timeout, and `put(key, value)`), handed to the
      plugin as PJRT_Client_Create's kv callbacks.
  """

  def __init__(self, plugin: Any, options: dict[str, Any] | None = None,
               kv_store: Any = None):
    if isinstance(plugin, loader.Plugin):
      self.plugin = loader.load_plugin(plugin)
    elif isinstance(plugin, str) and not any(c in plugin for c in "/\\."):
      self.plugin = loader.get_plugin(plugin)
    else:
      self.plugin = loader.load_plugin(plugin)
    self._children: weakref.WeakSet[_Owned] = weakref.WeakSet()
    self._devices: dict[int, Device] = {}
    self._memories: dict[int, Memory] = {}
    self.closed = True
    named = loader.encode_named_values(options)
    kv = {}
    if kv_store is not None:
      # Kept for the client's life: the plugin may call them until then.
      self._kv_callbacks = _KeyValueCallbacks(kv_store)
      kv = self._kv_callbacks.fields()
    args = self.plugin.call(
        "Client_Create", create_options=named,
        num_options=len(options) if options else 0, **kv)
    self._handle = args.client
    self.closed = False

  # -- Lifetime. ------------------------------------------------------------

  @property
  def handle(self) -> int:
    if self.closed:
      raise support.FailedPreconditionError("the client is closed")
    return self._handle

  def own(self, child: "_Owned") -> None:
    """Records a plugin object of this client, which `close` destroys if
    it is still alive (held weakly: a dropped object frees itself)."""
    self._children.add(child)

  def close(self) -> None:
    """Destroys live buffers and executables, then the client (idempotent)."""
    if self.closed:
      return
    for child in list(self._children):
      try:
        child.close()
      except support.XlaError:
        pass
    self.closed = True
    self.plugin.call("Client_Destroy", client=self._handle)

  def __enter__(self) -> "Client":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  def __del__(self):
    try:
      self.close()
    except Exception:  # pylint: disable=broad-except
      pass

  def _call(self, slot: str, **fields: Any) -> Any:
    return self.plugin.call(slot, client=self.handle, **fields)

  def device_from_handle(self, handle: int) -> Device:
    """The Device object of a PJRT_Device* of this client (one per handle)."""
    device = self._devices.get(handle)
    if device is None:
      device = self._devices[handle] = Device(self, handle)
    return device

  def memory_from_handle(self, handle: int) -> Memory:
    """The Memory object of a PJRT_Memory* of this client (one per handle)."""
    memory = self._memories.get(handle)
    if memory is None:
      memory = self._memories[handle] = Memory(self, handle)
    return memory

  # -- Platform. ------------------------------------------------------------

  @property
  def platform_name(self) -> str:
    args = self._call("Client_PlatformName")
    return loader.read_string(args.platform_name, args.platform_name_size)

  @property
  def platform_version(self) -> str:
    args = self._call("Client_PlatformVersion")
    return loader.read_string(args.platform_version,
                              args.platform_version_size)

  @property
  def process_index(self) -> int:
    return self._call("Client_ProcessIndex").process_index

  # -- Devices and memories. ------------------------------------------------

  def devices(self) -> list[Device]:
    args = self._call("Client_Devices")
    return [self.device_from_handle(h)
            for h in _handles(args.devices, args.num_devices)]

  def addressable_devices(self) -> list[Device]:
    """The devices this process drives (asked once: fixed for a client)."""
    cached = self._addressable_devices
    if cached is None:
      args = self._call("Client_AddressableDevices")
      cached = self._addressable_devices = [
          self.device_from_handle(h)
          for h in _handles(args.addressable_devices,
                            args.num_addressable_devices)]
    return list(cached)

  _addressable_devices: list[Device] | None = None

  def lookup_device(self, device_id: int) -> Device:
    """The device with global id `device_id` (plugin's error otherwise)."""
    if not isinstance(device_id, (int, np.integer)) or not (
        _C_INT_MIN <= int(device_id) <= _C_INT_MAX):
      raise support.InvalidArgumentError(
          f"device id {device_id!r} is not a valid PJRT device id (a C int)")
    args = self._call("Client_LookupDevice", id=int(device_id))
    return self.device_from_handle(args.device)

  def lookup_addressable_device(self, local_hardware_id: int) -> Device:
    args = self._call("Client_LookupAddressableDevice",
                      local_hardware_id=local_hardware_id)
    return self.device_from_handle(args.addressable_device)

  def memories(self) -> list[Memory]:
    """Every memory addressable by this client (all devices)."""
    args = self._call("Client_AddressableMemories")
    return [self.memory_from_handle(h)
            for h in _handles(args.addressable_memories,
                              args.num_addressable_memories)]

  def default_device_assignment(self, num_replicas: int,
                                num_partitions: int) -> list[list[int]]:
    """Device ids indexed [replica][partition]."""
    for what, n in (("num_replicas", num_replicas),
                    ("num_partitions", num_partitions)):
      if not isinstance(n, (int, np.integer)) or n < 1:
        raise support.InvalidArgumentError(
            f"{what} must be a positive integer, got {n!r}")
    size = int(num_replicas) * int(num_partitions)
    if size > _MAX_ASSIGNMENT:
      raise support.InvalidArgumentError(
          f"a device assignment of {num_replicas} x {num_partitions} = "
          f"{size} entries is too large (at most {_MAX_ASSIGNMENT})")
    out = (ctypes.c_int * max(1, size))()
    self._call("Client_DefaultDeviceAssignment", num_replicas=num_replicas,
               num_partitions=num_partitions, default_assignment_size=size,
               default_assignment=out)
    return [[out[r * num_partitions + p] for p in range(num_partitions)]
            for r in range(num_replicas)]

  # -- Buffers. -------------------------------------------------------------

  def buffer_from_numpy(self, array: Any, device: Device | None = None, *,
                        memory: Memory | None = None) -> Buffer:
    """Copies a host array to `device` (default: first addressable device).

    Every numpy dtype with a PJRT_Buffer_Type is accepted (bool, ints,
    floats, complex, and the ml_dtypes bf16 / f8 / int4 ... types).

    Raises:
      support.InvalidArgumentError: unsupported dtype, or the plugin's error.
    """
    array = np.asarray(array)
    element_type = dtypes.buffer_type(array.dtype)
    byte_strides = None
    if not array.flags.c_contiguous:
      if element_type in dtypes.SUB_BYTE or array.size == 0:
        array = np.ascontiguousarray(array)
      else:
        byte_strides = list(array.strides)
    if device is None and memory is None:
      device = self.addressable_devices()[0]
    fields = dict(
        client=self.handle, data=array.ctypes.data, type=element_type,
        dims=array.shape, num_dims=array.ndim,
        host_buffer_semantics=(
            abi.HostBufferSemantics.IMMUTABLE_UNTIL_TRANSFER_COMPLETES))
    if byte_strides:
      fields.update(byte_strides=byte_strides,
                    num_byte_strides=len(byte_strides))
    if device is not None:
      fields["device"] = device.handle
    if memory is not None:
      fields["memory"] = memory.handle
    args = abi.make_args(abi.PJRT_Client_BufferFromHostBuffer_Args, **fields)
    self.plugin.call("Client_BufferFromHostBuffer", args)
    buffer = Buffer(self, args.buffer)
    # `array` must outlive the transfer: wait for the plugin to be done.
    done = _take_event(self.plugin, args.done_with_host_buffer)
    if done is not None:
      try:
        done.wait()
      finally:
        done.close()
    return buffer

  # -- Compilation. ---------------------------------------------------------

  def compile(self, program: Any,
              format: str | None = None,  # pylint: disable=redefined-builtin
              compile_options: bytes | None = None) -> LoadedExecutable:
    """Compiles and loads `program`.

    Args:
      program: StableHLO as MLIR text (str or bytes), a portable artifact
        (bytes) or a parsed module (stablehlo IR `Module`); or HLO as a
        serialized HloModuleProto / HloModuleProtoWithConfig (bytes, with
        `format`), such a protobuf message, or an object with
        `as_serialized_hlo_module_proto()` (JAX's `XlaComputation`, from
        `jax.jit(f).lower(x).compiler_ir("hlo")`). HLO compiles where the
        plugin takes it (ours: the cpu and evaluator backends).
      format: the PJRT_Program format ("mlir", "hlo", "hlo_with_config");
        default: what `program` is ("mlir" for str / bytes).
      compile_options: a serialized xla.CompileOptionsProto; default: one
        replica, one partition (`compile_options.compile_options()`).

    Raises:
      support.XlaError: the plugin's error, e.g. INVALID_ARGUMENT for a
        program that does not parse or verify.
      support.InvalidArgumentError: a `program` of no known kind.
    """
    code, fmt_name = program_bytes(program, format)
    if compile_options is None:
      compile_options = compile_options_lib.compile_options()
    fmt = fmt_name.encode("utf-8")
    prog = abi.make_args(abi.PJRT_Program, code=code, code_size=len(code),
                         format=fmt, format_size=len(fmt))
    args = self._call("Client_Compile", program=prog,
                      compile_options=bytes(compile_options),
                      compile_options_size=len(compile_options))
    return LoadedExecutable(self, args.executable)

  def query_capabilities(self, program: Any, table: Any = None) -> Any:
    """Which ops of `program` this client's plugin supports, without
    compiling (see pjrt/_src/capability.py).

    Args:
      program: MLIR text, a portable artifact (bytes) or a parsed Module.
      table: a `capability.CapabilityTable` to answer from; default: the
        plugin's own (`capability.table_for_plugin`), which for a plugin
        that exposes no capability information says "maybe" for every op.

    Returns:
      A `capability.CapabilityReport`.
    """
    # Imported here: it loads the StableHLO parser, which compile() and the
    # rest of the client never need.
    from pjrt._src import capability  # pylint: disable=g-import-not-at-top
    if table is None:
      table = capability.table_for_plugin(self.plugin)
    return capability.query(program, table)

  def __repr__(self) -> str:
    if self.closed:
      return "<Client closed>"
    return f"<Client {self.plugin.name!r} {self.platform_name}>"
