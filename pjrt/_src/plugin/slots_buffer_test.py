"""Tests of slots_buffer.py through the pjrt client and raw slot calls."""

import ctypes
import gc

import ml_dtypes
import numpy as np
import pytest

import pjrt
import support
from pjrt._src import abi
from pjrt._src import abi_types
from pjrt._src import dtypes
from pjrt._src.plugin import testing


@pytest.fixture(name="client")
def _client():
  c = testing.client(num_devices=2)
  yield c
  c.close()


def _raw(client, array, **fields):
  """A raw PJRT_Buffer* of `array` (BufferFromHostBuffer), and its event."""
  array = np.ascontiguousarray(array)
  args = testing.call(
      client, "Client_BufferFromHostBuffer", client=client.handle,
      data=array.ctypes.data, type=dtypes.buffer_type(array.dtype),
      dims=list(array.shape), num_dims=array.ndim,
      device=client.devices()[0].handle, **fields)
  testing.call(client, "Event_Destroy", event=args.done_with_host_buffer)
  return pjrt.Buffer(client, args.buffer)


@pytest.mark.parametrize("array", [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.float64(2.5),
    np.zeros((0, 4), np.int16),
    np.array([True, False, True]),
    np.arange(4, dtype=np.uint64) * (2**62),
    np.array([1 + 2j, -3j], np.complex128),
    np.arange(5).astype(ml_dtypes.bfloat16),
    np.array([-8, 7, 0], ml_dtypes.int4),
], ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_round_trip(client, array):
  buffer = client.buffer_from_numpy(array)
  assert buffer.shape == array.shape and buffer.dtype == array.dtype
  out = buffer.to_numpy()
  assert out.tobytes() == np.asarray(array).tobytes()
  assert buffer.on_device_size_in_bytes == np.asarray(array).nbytes
  assert buffer.is_on_cpu


def test_strided_host_data(client):
  base = np.arange(24, dtype=np.int32).reshape(4, 6)
  view = base[::2, ::-3]
  np.testing.assert_array_equal(client.buffer_from_numpy(view).to_numpy(),
                                view)


def test_device_layout_column_major(client):
  array = np.arange(6, dtype=np.float32).reshape(2, 3)
  layout = abi.make_args(abi.PJRT_Buffer_MemoryLayout)
  layout.type = abi.MemoryLayoutType.TILED
  abi.set_fields(layout.tiled, minor_to_major=[0, 1], minor_to_major_size=2)
  buffer = _raw(client, array, device_layout=layout)
  got = testing.call(client, "Buffer_GetMemoryLayout", buffer=buffer.handle)
  tiled = got.layout.tiled
  assert [tiled.minor_to_major[i] for i in range(2)] == [0, 1]
  # Without a host layout, bytes come in the buffer's own layout.
  out = np.empty(6, np.float32)
  args = testing.call(client, "Buffer_ToHostBuffer", src=buffer.handle,
                      dst=out.ctypes.data, dst_size=out.nbytes)
  pjrt.Event(client.plugin, args.event).wait()
  np.testing.assert_array_equal(out, array.T.reshape(-1))


def test_host_layout_strides_and_size_query(client):
  array = np.arange(6, dtype=np.int16).reshape(2, 3)
  buffer = client.buffer_from_numpy(array)
  layout = abi.make_args(abi.PJRT_Buffer_MemoryLayout)
  layout.type = abi.MemoryLayoutType.STRIDES
  abi.set_fields(layout.strides, byte_strides=[2, 8], num_byte_strides=2)
  query = testing.call(client, "Buffer_ToHostBuffer", src=buffer.handle,
                       host_layout=layout)
  assert query.dst_size == 8 * 2 + 2 * 1 + 2  # Spans up to [1, 2].
  out = np.zeros(query.dst_size // 2, np.int16)
  args = testing.call(client, "Buffer_ToHostBuffer", src=buffer.handle,
                      host_layout=layout, dst=out.ctypes.data,
                      dst_size=out.nbytes)
  pjrt.Event(client.plugin, args.event).wait()
  np.testing.assert_array_equal(
      np.lib.stride_tricks.as_strided(out, (2, 3), (2, 8)), array)
  with pytest.raises(support.InvalidArgumentError, match="smaller"):
    testing.call(client, "Buffer_ToHostBuffer", src=buffer.handle,
                 dst=out.ctypes.data, dst_size=3)


def test_all_zero_host_layout_means_the_buffer_layout(client):
  """jaxlib sometimes hands a host layout struct left all zeros when it
  copies an array to another client's device; that reads as no layout."""
  array = np.arange(6, dtype=np.float64).reshape(2, 3)
  buffer = client.buffer_from_numpy(array)
  layout = abi.PJRT_Buffer_MemoryLayout()  # struct_size 0, all zeros
  out = np.zeros(6, np.float64)
  args = testing.call(client, "Buffer_ToHostBuffer", src=buffer.handle,
                      host_layout=layout, dst=out.ctypes.data,
                      dst_size=out.nbytes)
  pjrt.Event(client.plugin, args.event).wait()
  np.testing.assert_array_equal(out, array.reshape(-1))
  layout.struct_size = 8  # set, but too small: still an error
  with pytest.raises(support.InvalidArgumentError, match="struct_size"):
    testing.call(client, "Buffer_ToHostBuffer", src=buffer.handle,
                 host_layout=layout, dst=out.ctypes.data, dst_size=out.nbytes)


def test_delete(client):
  buffer = testing.ones(client)
  event = buffer.ready()
  buffer.delete()
  assert buffer.is_deleted
  event.wait()  # Asked for before the delete: stays ready without error.
  with pytest.raises(support.InvalidArgumentError, match="deleted"):
    buffer.to_numpy()
  with pytest.raises(support.InvalidArgumentError, match="deleted"):
    buffer.ready().wait()


def test_copies(client):
  source, other = client.devices()
  array = np.arange(4, dtype=np.float32)
  buffer = client.buffer_from_numpy(array, source)
  args = testing.call(client, "Buffer_CopyToDevice", buffer=buffer.handle,
                      dst_device=other.handle)
  copy = pjrt.Buffer(client, args.dst_buffer)
  assert copy.device == other
  np.testing.assert_array_equal(copy.to_numpy(), array)
  pinned = source.memories()[1]
  args = testing.call(client, "Buffer_CopyToMemory", buffer=buffer.handle,
                      dst_memory=pinned.handle)
  in_pinned = pjrt.Buffer(client, args.dst_buffer)
  assert in_pinned.memory == pinned and in_pinned.memory.kind == "pinned_host"
  np.testing.assert_array_equal(in_pinned.to_numpy(), array)
  # Onto its own device / memory: a distinct buffer with the same contents.
  for slot, field, target in (("Buffer_CopyToDevice", "dst_device", source),
                              ("Buffer_CopyToMemory", "dst_memory",
                               buffer.memory)):
    args = testing.call(client, slot, buffer=buffer.handle,
                        **{field: target.handle})
    assert args.dst_buffer != buffer.handle
    same = pjrt.Buffer(client, args.dst_buffer)
    assert same.memory == buffer.memory
    np.testing.assert_array_equal(same.to_numpy(), array)


def test_raw_copies(client):
  array = np.arange(8, dtype=np.uint8)
  buffer = client.buffer_from_numpy(array)
  out = np.zeros(3, np.uint8)
  args = testing.call(client, "Buffer_CopyRawToHost", buffer=buffer.handle,
                      dst=out.ctypes.data, offset=2, transfer_size=3)
  pjrt.Event(client.plugin, args.event).wait()
  np.testing.assert_array_equal(out, [2, 3, 4])
  with pytest.raises(support.InvalidArgumentError, match="does not fit"):
    testing.call(client, "Buffer_CopyRawToHost", buffer=buffer.handle,
                 dst=out.ctypes.data, offset=6, transfer_size=3)
  # The future flavour copies once the caller says where to.
  args = testing.call(client, "Buffer_CopyRawToHostFuture",
                      buffer=buffer.handle, offset=5, transfer_size=3)
  event = pjrt.Event(client.plugin, args.event)
  assert not event.is_ready()
  ready = abi_types.PJRT_Buffer_CopyRawToHostFuture_Callback_Args()
  ready.struct_size = type(ready).STRUCT_SIZE
  ready.callback_data = args.callback_data
  ready.dst = out.ctypes.data
  ctypes.CFUNCTYPE(None, ctypes.c_void_p)(args.future_ready_callback)(
      ctypes.addressof(ready))
  event.wait()
  np.testing.assert_array_equal(out, [5, 6, 7])


def test_bitcast(client):
  array = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
  buffer = client.buffer_from_numpy(array)
  args = testing.call(client, "Buffer_Bitcast", buffer=buffer.handle,
                      element_type=abi.BufferType.S32, dims=[2, 2],
                      num_dims=2)
  cast = pjrt.Buffer(client, args.out_buffer)
  np.testing.assert_array_equal(cast.to_numpy(),
                                array.view(np.int32).reshape(2, 2))
  with pytest.raises(support.InvalidArgumentError, match="bitcast"):
    testing.call(client, "Buffer_Bitcast", buffer=buffer.handle,
                 element_type=abi.BufferType.F64, dims=[4], num_dims=1)


def test_external_references_keep_the_data(client):
  array = np.arange(5, dtype=np.int64)
  buffer = client.buffer_from_numpy(array)
  testing.call(client, "Buffer_IncreaseExternalReferenceCount",
               buffer=buffer.handle)
  pointer = testing.call(client, "Buffer_OpaqueDeviceMemoryDataPointer",
                         buffer=buffer.handle).device_memory_ptr
  assert pointer == testing.call(client, "Buffer_UnsafePointer",
                                 buffer=buffer.handle).buffer_pointer
  buffer.delete()
  gc.collect()
  view = np.ctypeslib.as_array(ctypes.cast(pointer,
                                           ctypes.POINTER(ctypes.c_int64)),
                               shape=(5,))
  np.testing.assert_array_equal(view, array)  # Still alive.
  testing.call(client, "Buffer_DecreaseExternalReferenceCount",
               buffer=buffer.handle)
  with pytest.raises(support.FailedPreconditionError):
    testing.call(client, "Buffer_DecreaseExternalReferenceCount",
                 buffer=buffer.handle)


def test_uninitialized_and_error_buffers(client):
  device = client.devices()[1]
  args = testing.call(client, "Client_CreateUninitializedBuffer",
                      client=client.handle, shape_dims=[3], shape_num_dims=1,
                      shape_element_type=abi.BufferType.S8,
                      device=device.handle)
  blank = pjrt.Buffer(client, args.buffer)
  assert blank.device == device and blank.shape == (3,)
  args = testing.call(client, "Client_CreateErrorBuffer",
                      client=client.handle,
                      error_code=support.StatusCode.ABORTED,
                      error_message=b"upstream failed", error_message_size=15,
                      shape_dims=[2], shape_num_dims=1,
                      shape_element_type=abi.BufferType.F32,
                      memory=device.default_memory().handle)
  failed = pjrt.Buffer(client, args.buffer)
  with pytest.raises(support.AbortedError, match="upstream failed"):
    failed.to_numpy()


def test_view_of_host_memory_calls_on_delete(client):
  array = np.arange(4, dtype=np.float32)
  deleted = []
  on_delete = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(
      lambda pointer, arg: deleted.append((pointer, arg)))
  args = testing.call(client, "Client_CreateViewOfDeviceBuffer",
                      client=client.handle, device_buffer_ptr=array.ctypes.data,
                      dims=[4], num_dims=1, element_type=abi.BufferType.F32,
                      device=client.devices()[0].handle,
                      on_delete_callback=on_delete, on_delete_callback_arg=7)
  view = pjrt.Buffer(client, args.buffer)
  array[0] = 42  # A view, not a copy.
  assert view.to_numpy()[0] == 42
  view.close()
  gc.collect()
  assert deleted == [(array.ctypes.data, 7)]


def test_alias_buffer(client):
  memory = client.devices()[0].default_memory()
  args = testing.call(client, "Client_CreateAliasBuffer",
                      client=client.handle, memory=memory.handle,
                      shape_dims=[2], shape_num_dims=1,
                      shape_element_type=abi.BufferType.F32)
  alias = pjrt.Buffer(client, args.alias_buffer)
  assert not alias.ready().is_ready()
  source = client.buffer_from_numpy(np.array([3, 4], np.float32))
  testing.call(client, "Client_FulfillAliasBuffer", client=client.handle,
               buffer=source.handle, status_code=0,
               fulfill_alias_buffer_cb=args.fulfill_alias_buffer_cb)
  np.testing.assert_array_equal(alias.to_numpy(), [3, 4])


def test_donate_with_control_dependency(client):
  source = client.buffer_from_numpy(np.array([1, 2], np.int32))
  args = testing.call(client, "Buffer_DonateWithControlDependency",
                      buffer=source.handle)
  assert source.is_deleted
  out = pjrt.Buffer(client, args.out_buffer)
  assert not out.ready().is_ready()
  ready = abi_types.PJRT_Buffer_DonateWithControlDependency_Callback_Args()
  ready.struct_size = type(ready).STRUCT_SIZE
  ready.callback_data = args.callback_data
  ctypes.CFUNCTYPE(None, ctypes.c_void_p)(args.dependency_ready_callback)(
      ctypes.addressof(ready))
  np.testing.assert_array_equal(out.to_numpy(), [1, 2])


def test_wrong_handle_type(client):
  with pytest.raises(support.InvalidArgumentError, match="PJRT_Device"):
    testing.call(client, "Buffer_ElementType",
                 buffer=client.devices()[0].handle)


def test_unsupported_element_type(client):
  with pytest.raises(support.UnimplementedError):
    testing.call(client, "Client_CreateUninitializedBuffer",
                 client=client.handle, shape_dims=[1], shape_num_dims=1,
                 shape_element_type=abi.BufferType.TOKEN,
                 device=client.devices()[0].handle)
