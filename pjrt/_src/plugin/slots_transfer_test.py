"""Tests of slots_transfer.py: async host-to-device transfer managers."""

import numpy as np
import pytest

import pjrt
import support
from pjrt._src import abi
from pjrt._src.plugin import testing


@pytest.fixture(name="client")
def _client():
  c = testing.client(num_devices=2)
  yield c
  c.close()


def _manager(client, specs):
  shape_specs = (abi.PJRT_ShapeSpec * len(specs))()
  keep = []
  for spec, (dims, element_type) in zip(shape_specs, specs):
    abi.set_fields(spec, struct_size=abi.PJRT_ShapeSpec.STRUCT_SIZE,
                   dims=list(dims), num_dims=len(dims),
                   element_type=element_type)
    keep.append(spec._keepalive)  # pylint: disable=protected-access
  memory = client.devices()[1].default_memory()
  return testing.call(client, "Client_CreateBuffersForAsyncHostToDevice",
                      client=client.handle, shape_specs=shape_specs,
                      num_shape_specs=len(specs),
                      memory=memory.handle).transfer_manager


def test_transfer_in_pieces(client):
  manager = _manager(client, [((2, 3), abi.BufferType.F32),
                              ((4,), abi.BufferType.S8)])
  count = testing.call(client,
                       "AsyncHostToDeviceTransferManager_BufferCount",
                       transfer_manager=manager).buffer_count
  assert count == 2
  size = testing.call(client, "AsyncHostToDeviceTransferManager_BufferSize",
                      transfer_manager=manager, buffer_index=0).buffer_size
  assert size == 24
  device = testing.call(client, "AsyncHostToDeviceTransferManager_Device",
                        transfer_manager=manager).device_out
  assert device == client.devices()[1].handle
  buffer = pjrt.Buffer(client, testing.call(
      client, "AsyncHostToDeviceTransferManager_RetrieveBuffer",
      transfer_manager=manager, buffer_index=0).buffer_out)
  assert not buffer.ready().is_ready()
  data = np.arange(6, dtype=np.float32).tobytes()
  for offset, last in ((0, False), (12, True)):
    piece = data[offset:offset + 12]
    args = testing.call(client, "AsyncHostToDeviceTransferManager_TransferData",
                        transfer_manager=manager, buffer_index=0, data=piece,
                        offset=offset, transfer_size=12,
                        is_last_transfer=last)
    testing.call(client, "Event_Destroy", event=args.done_with_h2d_transfer)
  np.testing.assert_array_equal(buffer.to_numpy(),
                                np.arange(6, dtype=np.float32).reshape(2, 3))
  with pytest.raises(support.FailedPreconditionError, match="retrieved"):
    testing.call(client, "AsyncHostToDeviceTransferManager_RetrieveBuffer",
                 transfer_manager=manager, buffer_index=0)
  second = pjrt.Buffer(client, testing.call(
      client, "AsyncHostToDeviceTransferManager_RetrieveBuffer",
      transfer_manager=manager, buffer_index=1).buffer_out)
  message = b"source gone"
  testing.call(client, "AsyncHostToDeviceTransferManager_SetBufferError",
               transfer_manager=manager, buffer_index=1,
               error_code=support.StatusCode.UNAVAILABLE,
               error_message=message, error_message_size=len(message))
  with pytest.raises(support.UnavailableError, match="source gone"):
    second.to_numpy()
  testing.call(client, "AsyncHostToDeviceTransferManager_Destroy",
               transfer_manager=manager)


def test_out_of_range(client):
  manager = _manager(client, [((2,), abi.BufferType.S32)])
  with pytest.raises(support.InvalidArgumentError, match="does not fit"):
    testing.call(client, "AsyncHostToDeviceTransferManager_TransferData",
                 transfer_manager=manager, buffer_index=0, data=b"12345678",
                 offset=4, transfer_size=8, is_last_transfer=True)
  with pytest.raises(support.InvalidArgumentError, match="out of range"):
    testing.call(client, "AsyncHostToDeviceTransferManager_BufferSize",
                 transfer_manager=manager, buffer_index=3)
  testing.call(client, "AsyncHostToDeviceTransferManager_Destroy",
               transfer_manager=manager)


def test_destroy_cancels_unfinished_buffers(client):
  manager = _manager(client, [((2,), abi.BufferType.S32)])
  buffer = pjrt.Buffer(client, testing.call(
      client, "AsyncHostToDeviceTransferManager_RetrieveBuffer",
      transfer_manager=manager, buffer_index=0).buffer_out)
  testing.call(client, "AsyncHostToDeviceTransferManager_Destroy",
               transfer_manager=manager)
  with pytest.raises(support.CancelledError):
    buffer.to_numpy()


def test_copy_to_device_streams_are_never_ours(client):
  with pytest.raises(support.UnimplementedError, match="CopyToDeviceStream"):
    testing.call(client, "CopyToDeviceStream_TotalBytes", stream=12345)


def test_transfer_literal(client):
  manager = _manager(client, [((2, 2), abi.BufferType.S16)])
  literal = np.array([[1, 2], [3, 4]], np.int16)
  args = testing.call(
      client, "AsyncHostToDeviceTransferManager_TransferLiteral",
      transfer_manager=manager, buffer_index=0, data=literal.ctypes.data,
      shape_dims=[2, 2], shape_num_dims=2,
      shape_element_type=abi.BufferType.S16)
  testing.call(client, "Event_Destroy", event=args.done_with_h2d_transfer)
  buffer = pjrt.Buffer(client, testing.call(
      client, "AsyncHostToDeviceTransferManager_RetrieveBuffer",
      transfer_manager=manager, buffer_index=0).buffer_out)
  np.testing.assert_array_equal(buffer.to_numpy(), literal)
  with pytest.raises(support.InvalidArgumentError, match="does not match"):
    testing.call(client, "AsyncHostToDeviceTransferManager_TransferLiteral",
                 transfer_manager=manager, buffer_index=0,
                 data=literal.ctypes.data, shape_dims=[4], shape_num_dims=1,
                 shape_element_type=abi.BufferType.S16)
  testing.call(client, "AsyncHostToDeviceTransferManager_Destroy",
               transfer_manager=manager)


def test_destroying_a_null_copy_to_device_stream_succeeds(client):
  testing.call(client, "CopyToDeviceStream_Destroy", stream=None)
  with pytest.raises(support.UnimplementedError, match="CopyToDeviceStream"):
    testing.call(client, "CopyToDeviceStream_Destroy", stream=12345)
