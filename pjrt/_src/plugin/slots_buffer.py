"""Slots: PJRT_Buffer_*, buffer creation by the client, async host-to-device
transfer managers, and PJRT_CopyToDeviceStream_* (never created: stubs).

Host data is copied during the call that hands it over (so every host
buffer semantics is honoured and `done_with_host_buffer` is ready at once).
Device-to-host copies wait for the buffer asynchronously: the returned event
completes once the data is ready and copied.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

import support
from pjrt._src import abi
from pjrt._src import abi_types
from pjrt._src import dtypes
from pjrt._src.plugin import cabi
from pjrt._src.plugin import errors
from pjrt._src.plugin import events
from pjrt._src.plugin import handles
from pjrt._src.plugin import layouts
from pjrt._src.plugin import native
from pjrt._src.plugin import runtime
from pjrt._src.plugin.slot_registry import implements
from pjrt._src.plugin.slots_client import client_of
from pjrt._src.plugin.slots_client import device_of
from pjrt._src.plugin.slots_client import memory_of


def buffer_of(address) -> runtime.Buffer:
  return handles.TABLE.get(address, runtime.BUFFER)


def live_buffer_of(address) -> runtime.Buffer:
  buffer = buffer_of(address)
  buffer.check_usable()
  return buffer


def element_dtype(element_type: int) -> tuple[abi.BufferType, np.dtype]:
  try:
    kind = abi.BufferType(element_type)
  except ValueError:
    raise support.InvalidArgumentError(
        f"unknown PJRT_Buffer_Type {element_type}") from None
  if kind == abi.BufferType.INVALID:
    raise support.InvalidArgumentError("PJRT_Buffer_Type INVALID")
  return kind, dtypes.numpy_dtype(kind)


def target_memory(client: runtime.Client, device_address,
                  memory_address) -> runtime.Memory:
  """The memory a new buffer goes to: `memory`, else `device`'s default."""
  if memory_address:
    memory = memory_of(memory_address)
  elif device_address:
    memory = device_of(device_address).default_memory
  else:
    raise support.InvalidArgumentError(
        "neither a device nor a memory was given for the buffer")
  if memory.device.client is not client:
    raise support.InvalidArgumentError(
        "the device or memory belongs to another PJRT_Client")
  return memory


def new_buffer(buffer: runtime.Buffer) -> int:
  return runtime.register_buffer(buffer)


# -- Creating buffers. ---------------------------------------------------------


@implements("Client_BufferFromHostBuffer")
def _buffer_from_host_buffer(args):
  client = client_of(args.client)
  kind, dtype = element_dtype(args.type)
  shape = cabi.dims(args.dims, args.num_dims)
  strides = None
  if args.num_byte_strides:
    strides = cabi.int64s(args.byte_strides, args.num_byte_strides,
                          "byte_strides")
  memory = target_memory(client, args.device, args.memory)
  order = layouts.optional_minor_to_major(args.device_layout, len(shape))
  view = runtime.strided_view(args.data, dtype, shape, strides)
  buffer = runtime.Buffer.from_array(client, memory, np.array(view,
                                                              copy=True))
  if order is not None:
    buffer.minor_to_major = order
  args.done_with_host_buffer = events.new_event(events.Future.ready())
  args.buffer = new_buffer(buffer)


@implements("Client_CreateUninitializedBuffer")
def _create_uninitialized_buffer(args):
  client = client_of(args.client)
  kind, dtype = element_dtype(args.shape_element_type)
  shape = cabi.dims(args.shape_dims, args.shape_num_dims)
  memory = target_memory(client, args.device, args.memory)
  order = layouts.optional_minor_to_major(args.shape_layout, len(shape))
  buffer = runtime.Buffer.from_array(client, memory, np.zeros(shape, dtype))
  if order is not None:
    buffer.minor_to_major = order
  del kind
  args.buffer = new_buffer(buffer)


@implements("Client_CreateErrorBuffer")
def _create_error_buffer(args):
  client = client_of(args.client)
  kind, _ = element_dtype(args.shape_element_type)
  shape = cabi.dims(args.shape_dims, args.shape_num_dims)
  memory = target_memory(client, None, args.memory)
  code = int(args.error_code)
  if code == support.StatusCode.OK:
    raise support.InvalidArgumentError(
        "PJRT_Client_CreateErrorBuffer needs a non-OK error code")
  message = cabi.string(args.error_message, args.error_message_size)
  buffer = runtime.Buffer(client, memory, kind, shape,
                          events.Future.ready((code, message)))
  args.buffer = new_buffer(buffer)


_ON_DELETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class _ViewRelease:
  """Calls a view's on_delete_callback once its data is no longer used."""

  def __init__(self, callback: int, pointer: int, user_arg: int):
    self._callback, self._pointer, self._user_arg = callback, pointer, user_arg

  def __del__(self):
    try:
      if self._callback:
        _ON_DELETE(self._callback)(self._pointer, self._user_arg)
    except BaseException:  # pylint: disable=broad-except
      pass


@implements("Client_CreateViewOfDeviceBuffer")
def _create_view_of_device_buffer(args):
  client = client_of(args.client)
  _, dtype = element_dtype(args.element_type)
  shape = cabi.dims(args.dims, args.num_dims)
  memory = target_memory(client, args.device, args.memory)
  strides = None
  if args.layout:
    kind, values = layouts.read(args.layout.contents, len(shape))
    if kind == "strides":
      strides = values
    elif values != layouts.default_minor_to_major(len(shape)):
      raise support.UnimplementedError(
          "a view of device memory must have the default (row-major) "
          "layout or byte strides")
  # The memory the view reads holds the release object: when the last user
  # of the data goes (buffer deleted, no holds, no external references),
  # the callback runs.
  release = _ViewRelease(args.on_delete_callback, args.device_buffer_ptr,
                         args.on_delete_callback_arg)
  view = runtime.strided_view(args.device_buffer_ptr, dtype, shape, strides,
                              owner=release)
  buffer = runtime.Buffer(client, memory, dtypes.buffer_type(dtype), shape,
                          events.Future.ready(), view)
  args.buffer = new_buffer(buffer)


# -- Alias buffers. ------------------------------------------------------------

FULFILL_ALIAS = "PJRT_FulfillAliasBufferCallback"


@implements("Client_CreateAliasBuffer")
def _create_alias_buffer(args):
  client = client_of(args.client)
  kind, _ = element_dtype(args.shape_element_type)
  shape = cabi.dims(args.shape_dims, args.shape_num_dims)
  memory = target_memory(client, None, args.memory)
  order = layouts.optional_minor_to_major(args.shape_layout, len(shape))
  buffer = runtime.Buffer.pending(client, memory, kind, shape)
  if order is not None:
    buffer.minor_to_major = order
  args.alias_buffer = new_buffer(buffer)
  args.fulfill_alias_buffer_cb = handles.TABLE.add(FULFILL_ALIAS, buffer)


@implements("Client_FulfillAliasBuffer")
def _fulfill_alias_buffer(args):
  client_of(args.client)
  alias = handles.TABLE.remove(args.fulfill_alias_buffer_cb, FULFILL_ALIAS)
  code = int(args.status_code)
  if code != support.StatusCode.OK:
    alias.fail((code, cabi.string(args.error_message,
                                  args.error_message_size)))
    return
  source = live_buffer_of(args.buffer)
  if (source.element_type, source.shape) != (alias.element_type,
                                             alias.shape):
    status = (support.StatusCode.INVALID_ARGUMENT,
              f"alias of {alias.element_type.name}{list(alias.shape)} "
              f"fulfilled with {source.element_type.name}"
              f"{list(source.shape)}")
    alias.fail(status)
    raise support.InvalidArgumentError(status[1])
  _copy_when_ready(source, alias)


# -- Metadata. -----------------------------------------------------------------


@implements("Buffer_Destroy")
def _buffer_destroy(args):
  if not args.buffer:
    return
  buffer = handles.TABLE.remove(args.buffer, runtime.BUFFER)
  buffer.delete()


@implements("Buffer_ElementType")
def _buffer_element_type(args):
  args.type = buffer_of(args.buffer).element_type


def _dims_array(buffer: runtime.Buffer) -> Any:
  return buffer.c.get("dims", lambda: (ctypes.c_int64 * max(
      1, len(buffer.shape)))(*buffer.shape))


@implements("Buffer_Dimensions")
def _buffer_dimensions(args):
  buffer = buffer_of(args.buffer)
  args.dims = ctypes.cast(_dims_array(buffer), abi.INT64_P)
  args.num_dims = len(buffer.shape)


@implements("Buffer_UnpaddedDimensions")
def _buffer_unpadded_dimensions(args):
  buffer = buffer_of(args.buffer)
  args.unpadded_dims = ctypes.cast(_dims_array(buffer), abi.INT64_P)
  args.num_dims = len(buffer.shape)


@implements("Buffer_DynamicDimensionIndices")
def _buffer_dynamic_dimension_indices(args):
  buffer_of(args.buffer)
  args.dynamic_dim_indices = None  # Every dimension is static.
  args.num_dynamic_dims = 0


@implements("Buffer_GetMemoryLayout")
def _buffer_get_memory_layout(args):
  buffer = buffer_of(args.buffer)
  order = buffer.c.get(("minor_to_major", buffer.minor_to_major),
                       lambda: (ctypes.c_int64 * max(1, len(
                           buffer.minor_to_major)))(*buffer.minor_to_major))
  layout = args.layout
  ctypes.memset(ctypes.addressof(layout), 0, ctypes.sizeof(layout))
  layout.struct_size = abi.PJRT_Buffer_MemoryLayout.STRUCT_SIZE
  layout.type = abi.MemoryLayoutType.TILED
  tiled = layout.tiled
  tiled.struct_size = abi.PJRT_Buffer_MemoryLayout_Tiled.STRUCT_SIZE
  tiled.minor_to_major = ctypes.cast(order, abi.INT64_P)
  tiled.minor_to_major_size = len(buffer.minor_to_major)
  tiled.num_tiles = 0


@implements("Buffer_OnDeviceSizeInBytes")
def _buffer_on_device_size(args):
  args.on_device_size_in_bytes = live_buffer_of(args.buffer).nbytes


@implements("Buffer_Device")
def _buffer_device(args):
  args.device = buffer_of(args.buffer).device.handle


@implements("Buffer_Memory")
def _buffer_memory(args):
  args.memory = buffer_of(args.buffer).memory.handle


@implements("Buffer_Delete")
def _buffer_delete(args):
  buffer_of(args.buffer).delete()


@implements("Buffer_IsDeleted")
def _buffer_is_deleted(args):
  args.is_deleted = buffer_of(args.buffer).is_deleted


@implements("Buffer_IsOnCpu")
def _buffer_is_on_cpu(args):
  buffer_of(args.buffer)
  args.is_on_cpu = True


@implements("Buffer_ReadyEvent")
def _buffer_ready_event(args):
  buffer = buffer_of(args.buffer)
  if buffer.is_deleted:
    future = events.Future.ready((support.StatusCode.INVALID_ARGUMENT,
                                  "the buffer was deleted or donated"))
  else:
    future = buffer.future
  args.event = events.new_event(future)


# -- Copies. -------------------------------------------------------------------


def _copy_when_ready(source: runtime.Buffer, target: runtime.Buffer,
                     convert: Callable[[np.ndarray], np.ndarray] | None = None
                     ) -> None:
  """Fulfils pending `target` with `source`'s data once that is ready."""
  source.acquire_hold()

  def done(status: events.Status) -> None:
    try:
      if status is not None:
        target.fail(status)
        return
      data = np.array(source.held_array(), copy=True)
      target.fulfill(convert(data) if convert else data)
    except BaseException as e:  # pylint: disable=broad-except
      target.fail(errors.status_of(e))
    finally:
      source.release_hold()

  source.future.add_callback(done)


def _copy_to(source: runtime.Buffer, memory: runtime.Memory) -> int:
  target = runtime.Buffer.pending(source.client, memory, source.element_type,
                                  source.shape)
  target.minor_to_major = source.minor_to_major
  _copy_when_ready(source, target)
  return new_buffer(target)


@implements("Buffer_CopyToDevice")
def _buffer_copy_to_device(args):
  buffer = live_buffer_of(args.buffer)
  device = device_of(args.dst_device)
  if device.client is not buffer.client:
    raise support.InvalidArgumentError(
        "cannot copy a buffer to a device of another PJRT_Client")
  # A copy onto the buffer's own device is a plain copy (as in XLA's CPU
  # plugin; JAX asks for it, e.g. in scatter's gradient).
  args.dst_buffer = _copy_to(buffer, device.default_memory)


@implements("Buffer_CopyToMemory")
def _buffer_copy_to_memory(args):
  buffer = live_buffer_of(args.buffer)
  memory = memory_of(args.dst_memory)
  if memory.device.client is not buffer.client:
    raise support.InvalidArgumentError(
        "cannot copy a buffer to a memory of another PJRT_Client")
  # Same memory: a new buffer with the same contents, as above.
  args.dst_buffer = _copy_to(buffer, memory)


@implements("Buffer_ToHostBuffer")
def _buffer_to_host_buffer(args):
  buffer = live_buffer_of(args.src)
  if buffer.element_type == abi_types.BufferType.TOKEN:
    raise support.InvalidArgumentError(
        "a TOKEN buffer holds no data to copy to the host")
  rank = len(buffer.shape)
  if args.host_layout and args.host_layout.contents.struct_size:
    layout = layouts.read(args.host_layout.contents, rank)
  else:
    # No layout, or (seen from jaxlib 0.10.2, now and then, when it copies
    # an array to another client's device through the host) a layout struct
    # left all zeros: the buffer's own dense layout, which is what that
    # copy wants. A layout with a wrong nonzero struct_size is still an
    # error.
    layout = ("minor_to_major", buffer.minor_to_major)
  if layout[0] == "strides":
    needed = layouts.strided_size(buffer.shape, layout[1],
                                  buffer.dtype.itemsize)
  else:
    needed = buffer.nbytes
  if not args.dst:
    args.dst_size = needed
    return
  if args.dst_size < needed:
    raise support.InvalidArgumentError(
        f"dst_size {args.dst_size} is smaller than the {needed} bytes the "
        f"buffer {buffer.element_type.name}{list(buffer.shape)} needs")
  dst = args.dst
  result = events.Future()
  buffer.acquire_hold()

  def copy(status: events.Status) -> None:
    try:
      if status is not None:
        result.set(status)
        return
      array = buffer.held_array()
      if layout[0] == "strides":
        view = runtime.strided_view(dst, buffer.dtype, buffer.shape,
                                    layout[1])
        view[...] = array
      elif needed:
        data = layouts.physical(array, layout[1])
        ctypes.memmove(dst, data.ctypes.data, needed)
      result.set()
    except BaseException as e:  # pylint: disable=broad-except
      result.set_exception(e)
    finally:
      buffer.release_hold()

  buffer.future.add_callback(copy)
  args.event = events.new_event(result)


def _raw_range(buffer: runtime.Buffer, offset: int, size: int) -> None:
  if offset < 0 or size < 0 or offset + size > buffer.nbytes:
    raise support.InvalidArgumentError(
        f"raw copy of {size} bytes at offset {offset} does not fit the "
        f"{buffer.nbytes}-byte buffer")


def _raw_copy(buffer: runtime.Buffer, offset: int, size: int,
              dst_of: Callable[[], int], result: events.Future) -> None:
  """Copies raw (physical-order) bytes once the buffer is ready."""
  buffer.acquire_hold()

  def copy(status: events.Status) -> None:
    try:
      if status is not None:
        result.set(status)
        return
      data = layouts.physical(buffer.held_array(), buffer.minor_to_major)
      if size:
        ctypes.memmove(dst_of(), data.ctypes.data + offset, size)
      result.set()
    except BaseException as e:  # pylint: disable=broad-except
      result.set_exception(e)
    finally:
      buffer.release_hold()

  buffer.future.add_callback(copy)


@implements("Buffer_CopyRawToHost")
def _buffer_copy_raw_to_host(args):
  buffer = live_buffer_of(args.buffer)
  _raw_range(buffer, args.offset, args.transfer_size)
  if args.transfer_size and not args.dst:
    raise support.InvalidArgumentError("dst is NULL")
  dst = args.dst
  result = events.Future()
  _raw_copy(buffer, args.offset, args.transfer_size, lambda: dst, result)
  args.event = events.new_event(result)


# One-shot callbacks we hand to the caller: callback_data -> Python closure.
CALLBACK_DATA = "openxla_cpu callback data"

def _register_callback(name: str, args_type: type) -> None:
  """Registers native entry `name`: a C callback `void f(args_type*)` that
  runs the closure in `callback_data` once (with the status and struct)."""

  def run(args_p):
    try:
      args = args_p.contents
      fn = handles.TABLE.remove(args.callback_data, CALLBACK_DATA)
      code = int(args.error_code)
      status = None
      if code != support.StatusCode.OK:
        status = (code, cabi.string(args.error_message,
                                    args.error_message_size))
      fn(status, args)
    except BaseException:  # pylint: disable=broad-except
      pass

  native.register(name, ctypes.CFUNCTYPE(None, ctypes.POINTER(args_type))(
      run), "p>v")


_register_callback("buffer.raw_future_ready",
                   abi_types.PJRT_Buffer_CopyRawToHostFuture_Callback_Args)
_register_callback(
    "buffer.dependency_ready",
    abi_types.PJRT_Buffer_DonateWithControlDependency_Callback_Args)


@implements("Buffer_CopyRawToHostFuture")
def _buffer_copy_raw_to_host_future(args):
  buffer = live_buffer_of(args.buffer)
  offset, size = args.offset, args.transfer_size
  _raw_range(buffer, offset, size)
  result = events.Future()

  def on_dst_ready(status: events.Status, callback_args) -> None:
    if status is not None:
      result.set(status)
      return
    dst = callback_args.dst
    if size and not dst:
      result.set((support.StatusCode.INVALID_ARGUMENT, "dst is NULL"))
      return
    _raw_copy(buffer, offset, size, lambda: dst, result)

  args.event = events.new_event(result)
  args.callback_data = handles.TABLE.add(CALLBACK_DATA, on_dst_ready)
  args.future_ready_callback = native.address("buffer.raw_future_ready")


@implements("Buffer_DonateWithControlDependency")
def _buffer_donate_with_control_dependency(args):
  buffer = live_buffer_of(args.buffer)
  buffer.acquire_hold()
  buffer.donate()
  target = runtime.Buffer.pending(buffer.client, buffer.memory,
                                  buffer.element_type, buffer.shape)
  target.minor_to_major = buffer.minor_to_major

  def on_dependency(status: events.Status, callback_args) -> None:
    del callback_args
    if status is not None:
      buffer.release_hold()
      buffer.release_donation()
      target.fail(status)
      return

    def done(source_status: events.Status) -> None:
      try:
        if source_status is not None:
          target.fail(source_status)
        else:
          target.fulfill(buffer.held_array())
      finally:
        buffer.release_hold()
        buffer.release_donation()

    buffer.future.add_callback(done)

  args.callback_data = handles.TABLE.add(CALLBACK_DATA, on_dependency)
  args.dependency_ready_callback = native.address("buffer.dependency_ready")
  args.out_buffer = new_buffer(target)


@implements("Buffer_Bitcast")
def _buffer_bitcast(args):
  buffer = live_buffer_of(args.buffer)
  kind, dtype = element_dtype(args.element_type)
  shape = cabi.dims(args.dims, args.num_dims)
  order = layouts.optional_minor_to_major(args.device_layout, len(shape))
  size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
  if size != buffer.nbytes:
    raise support.InvalidArgumentError(
        f"cannot bitcast {buffer.element_type.name}{list(buffer.shape)} "
        f"({buffer.nbytes} bytes) to {kind.name}{list(shape)} ({size} bytes)")
  order = order or layouts.default_minor_to_major(len(shape))
  source_order = buffer.minor_to_major
  target = runtime.Buffer.pending(buffer.client, buffer.memory, kind, shape)
  target.minor_to_major = order

  def convert(data: np.ndarray) -> np.ndarray:
    raw = layouts.physical(data, source_order).view(np.uint8).reshape(-1)
    return layouts.from_physical(raw.view(dtype), shape, order)

  _copy_when_ready(buffer, target, convert)
  args.out_buffer = new_buffer(target)


# -- Raw pointers and external references. -------------------------------------


@implements("Buffer_UnsafePointer")
def _buffer_unsafe_pointer(args):
  args.buffer_pointer = live_buffer_of(args.buffer).data_pointer()


@implements("Buffer_OpaqueDeviceMemoryDataPointer")
def _buffer_opaque_pointer(args):
  args.device_memory_ptr = live_buffer_of(args.buffer).data_pointer()


@implements("Buffer_IncreaseExternalReferenceCount")
def _buffer_increase_external_references(args):
  buffer_of(args.buffer).add_external_reference()


@implements("Buffer_DecreaseExternalReferenceCount")
def _buffer_decrease_external_references(args):
  buffer_of(args.buffer).drop_external_reference()
