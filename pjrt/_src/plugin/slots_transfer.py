"""Slots: asynchronous host-to-device transfers (PJRT_Client_
CreateBuffersForAsyncHostToDevice and PJRT_AsyncHostToDeviceTransferManager_*),
and PJRT_CopyToDeviceStream_*.

A transfer manager owns pending buffers of given shapes; the caller sends
each buffer's bytes (in the buffer's device layout) in pieces, and the last
piece fulfils the buffer. Copy-to-device streams belong to host receive
callbacks, which this plugin never creates, so those slots can only ever see
handles that are not ours and answer UNIMPLEMENTED.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

import support
from pjrt._src import abi
from pjrt._src import abi_types
from pjrt._src.plugin import cabi
from pjrt._src.plugin import events
from pjrt._src.plugin import handles
from pjrt._src.plugin import layouts
from pjrt._src.plugin import runtime
from pjrt._src.plugin.slot_registry import implements
from pjrt._src.plugin.slots_buffer import element_dtype
from pjrt._src.plugin.slots_buffer import target_memory
from pjrt._src.plugin.slots_client import client_of

TRANSFER_MANAGER = "PJRT_AsyncHostToDeviceTransferManager"


class TransferManager:
  """Pending buffers filled piece by piece from host memory."""

  def __init__(self, buffers: list[runtime.Buffer]):
    self.buffers = buffers
    self.staging = [bytearray(b.nbytes) for b in buffers]
    self.retrieved = [False] * len(buffers)
    self.metadata: dict = {}
    self.lock = threading.Lock()
    self.device = buffers[0].device if buffers else None

  def buffer(self, index: int) -> runtime.Buffer:
    if not 0 <= index < len(self.buffers):
      raise support.InvalidArgumentError(
          f"buffer_index {index} out of range (the manager has "
          f"{len(self.buffers)} buffers)")
    return self.buffers[index]

  def transfer(self, index: int, data: bytes, offset: int,
               is_last: bool) -> None:
    buffer = self.buffer(index)
    with self.lock:
      if buffer.future.is_ready():
        raise support.FailedPreconditionError(
            f"buffer {index} was already completely transferred")
      staging = self.staging[index]
      if offset < 0 or offset + len(data) > len(staging):
        raise support.InvalidArgumentError(
            f"transfer of {len(data)} bytes at offset {offset} does not fit "
            f"buffer {index} of {len(staging)} bytes")
      staging[offset:offset + len(data)] = data
      if not is_last:
        return
      self.staging[index] = bytearray()
    flat = np.frombuffer(bytes(staging), dtype=buffer.dtype)
    buffer.fulfill(layouts.from_physical(flat, buffer.shape,
                                         buffer.minor_to_major))


def manager_of(address) -> TransferManager:
  return handles.TABLE.get(address, TRANSFER_MANAGER)


@implements("Client_CreateBuffersForAsyncHostToDevice")
def _create_buffers_for_async_host_to_device(args):
  client = client_of(args.client)
  memory = target_memory(client, None, args.memory)
  if args.num_shape_specs and not args.shape_specs:
    raise support.InvalidArgumentError("shape_specs is NULL")
  if args.num_device_layouts not in (0, args.num_shape_specs):
    raise support.InvalidArgumentError(
        f"{args.num_device_layouts} device layouts for "
        f"{args.num_shape_specs} shapes")
  buffers = []
  for i in range(args.num_shape_specs):
    spec = args.shape_specs[i]
    if spec.struct_size < abi.PJRT_ShapeSpec.STRUCT_SIZE:
      raise support.InvalidArgumentError(
          f"PJRT_ShapeSpec[{i}].struct_size is {spec.struct_size}")
    kind, _ = element_dtype(spec.element_type)
    shape = cabi.dims(spec.dims, spec.num_dims)
    buffer = runtime.Buffer.pending(client, memory, kind, shape)
    if args.num_device_layouts and args.device_layouts[i]:
      layout = ctypes.cast(args.device_layouts[i],
                           ctypes.POINTER(abi.PJRT_Buffer_MemoryLayout))
      buffer.minor_to_major = layouts.minor_to_major(layout.contents,
                                                     len(shape))
    buffers.append(buffer)
  args.transfer_manager = handles.TABLE.add(TRANSFER_MANAGER,
                                            TransferManager(buffers))


@implements("AsyncHostToDeviceTransferManager_Destroy")
def _manager_destroy(args):
  if not args.transfer_manager:
    return
  manager = handles.TABLE.remove(args.transfer_manager, TRANSFER_MANAGER)
  for buffer in manager.buffers:
    if not buffer.future.is_ready():
      buffer.fail((support.StatusCode.CANCELLED,
                   "the transfer manager was destroyed before the transfer "
                   "completed"))


@implements("AsyncHostToDeviceTransferManager_TransferData")
def _manager_transfer_data(args):
  manager = manager_of(args.transfer_manager)
  data = cabi.raw_bytes(args.data, args.transfer_size)
  manager.transfer(args.buffer_index, data, args.offset,
                   bool(args.is_last_transfer))
  args.done_with_h2d_transfer = events.new_event(events.Future.ready())


@implements("AsyncHostToDeviceTransferManager_TransferLiteral")
def _manager_transfer_literal(args):
  manager = manager_of(args.transfer_manager)
  buffer = manager.buffer(args.buffer_index)
  kind, dtype = element_dtype(args.shape_element_type)
  shape = cabi.dims(args.shape_dims, args.shape_num_dims)
  if (kind, shape) != (buffer.element_type, buffer.shape):
    raise support.InvalidArgumentError(
        f"literal {kind.name}{list(shape)} does not match buffer "
        f"{args.buffer_index} ({buffer.element_type.name}"
        f"{list(buffer.shape)})")
  order = layouts.optional_minor_to_major(args.shape_layout, len(shape))
  order = order or layouts.default_minor_to_major(len(shape))
  view = runtime.strided_view(args.data, dtype, (buffer.nbytes //
                                                 max(1, dtype.itemsize),),
                              None)
  logical = layouts.from_physical(np.array(view, copy=True), shape, order)
  data = layouts.physical(logical, buffer.minor_to_major).tobytes()
  manager.transfer(args.buffer_index, data, 0, True)
  args.done_with_h2d_transfer = events.new_event(events.Future.ready())


@implements("AsyncHostToDeviceTransferManager_RetrieveBuffer")
def _manager_retrieve_buffer(args):
  manager = manager_of(args.transfer_manager)
  buffer = manager.buffer(args.buffer_index)
  with manager.lock:
    if manager.retrieved[args.buffer_index]:
      raise support.FailedPreconditionError(
          f"buffer {args.buffer_index} was already retrieved")
    manager.retrieved[args.buffer_index] = True
  args.buffer_out = runtime.register_buffer(buffer)


@implements("AsyncHostToDeviceTransferManager_Device")
def _manager_device(args):
  manager = manager_of(args.transfer_manager)
  if manager.device is None:
    raise support.FailedPreconditionError("the manager has no buffers")
  args.device_out = manager.device.handle


@implements("AsyncHostToDeviceTransferManager_BufferCount")
def _manager_buffer_count(args):
  args.buffer_count = len(manager_of(args.transfer_manager).buffers)


@implements("AsyncHostToDeviceTransferManager_BufferSize")
def _manager_buffer_size(args):
  manager = manager_of(args.transfer_manager)
  args.buffer_size = manager.buffer(args.buffer_index).nbytes


@implements("AsyncHostToDeviceTransferManager_SetBufferError")
def _manager_set_buffer_error(args):
  manager = manager_of(args.transfer_manager)
  buffer = manager.buffer(args.buffer_index)
  code = int(args.error_code)
  if code == support.StatusCode.OK:
    raise support.InvalidArgumentError("SetBufferError needs a non-OK code")
  buffer.fail((code, cabi.string(args.error_message,
                                 args.error_message_size)))


@implements("AsyncHostToDeviceTransferManager_AddMetadata")
def _manager_add_metadata(args):
  manager = manager_of(args.transfer_manager)
  manager.metadata.update(cabi.named_values(args.transfer_metadata,
                                            args.num_metadata))


def _no_streams(args):
  del args
  raise support.UnimplementedError(
      "the openxla_cpu plugin creates no PJRT_CopyToDeviceStream (it runs "
      "no host receive callbacks), so this stream is not one of its objects")


@implements("CopyToDeviceStream_Destroy")
def _stream_destroy(args):
  if args.stream:  # Destroying NULL is allowed, and does nothing.
    _no_streams(args)


for _slot in ("CopyToDeviceStream_AddChunk",
              "CopyToDeviceStream_TotalBytes",
              "CopyToDeviceStream_GranuleSize",
              "CopyToDeviceStream_CurrentBytes"):
  implements(_slot)(_no_streams)
del _slot
