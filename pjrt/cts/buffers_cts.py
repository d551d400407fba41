"""Conformance: host <-> device transfers, buffer metadata, delete, events.

Round trips are parametrized over every PJRT_Buffer_Type with a numpy dtype
(the client's dtype table). A plugin that does not support a type must say
so with an error when the buffer is created (UNIMPLEMENTED or
INVALID_ARGUMENT), and the case is skipped; a buffer it accepts must come
back bit for bit.
"""

import threading
import warnings

import numpy as np
import pytest

import support
from pjrt._src import dtypes
from pjrt.cts import harness

_DTYPES = sorted(dtypes.TO_NUMPY.items(), key=lambda kv: kv[0].value)
_SHAPES = [(), (0,), (2, 3), (3, 0, 2), (1, 1, 5)]
_UNSUPPORTED_CODES = {support.StatusCode.UNIMPLEMENTED,
                      support.StatusCode.INVALID_ARGUMENT}

# Candidate values; each dtype keeps those it represents exactly.
_CANDIDATES = [0, 1, -1, 2, -2, 0.5, -0.5, 1.5, 3, 4, 6, -4, 7, 100, 0.25]


def _values(dtype: np.dtype, size: int) -> np.ndarray:
  """`size` values of `dtype`, cycling through the exact candidates."""
  candidates = np.array(_CANDIDATES, np.float64)
  with np.errstate(all="ignore"), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cast = candidates.astype(dtype)
    exact = cast[cast.astype(np.float64) == candidates]
  assert len(exact) >= 2, f"{dtype}: too few representable candidates"
  values = np.resize(exact, size)
  if dtype.kind == "c":
    values = values + (1j * values[::-1]).astype(dtype)
  return values.astype(dtype)


def _array(dtype: np.dtype, shape) -> np.ndarray:
  return _values(dtype, int(np.prod(shape))).reshape(shape)


def _transfer(client, array, device=None):
  try:
    return client.buffer_from_numpy(array, device)
  except support.XlaError as e:
    if harness.error_code(e) in _UNSUPPORTED_CODES:
      pytest.skip(f"the plugin does not take {array.dtype} buffers: {e}")
    raise


def _assert_same(result: np.ndarray, array: np.ndarray) -> None:
  assert result.dtype == array.dtype
  assert result.shape == array.shape
  assert result.tobytes() == np.ascontiguousarray(array).tobytes(), (
      f"round trip changed the data:\n{array!r}\n->\n{result!r}")


@pytest.mark.parametrize("shape", [(), (0,), (2, 3)], ids=str)
@pytest.mark.parametrize("element_type,dtype", _DTYPES,
                         ids=[t.name for t, _ in _DTYPES])
def test_round_trip(client, element_type, dtype, shape):
  array = _array(dtype, shape)
  buffer = _transfer(client, array)
  assert buffer.element_type == element_type
  assert buffer.shape == shape
  _assert_same(buffer.to_numpy(), array)


@pytest.mark.parametrize("shape", _SHAPES, ids=str)
def test_round_trip_shapes(client, shape):
  array = _array(np.dtype(np.float32), shape)
  buffer = client.buffer_from_numpy(array)
  assert buffer.shape == shape
  _assert_same(buffer.to_numpy(), array)


_STRIDED = {
    "transposed": lambda a: a.T,
    "every_other_row": lambda a: a[::2],
    "reversed_columns": lambda a: a[:, ::-1],
    "sliced_and_strided": lambda a: a[1:, ::3],
}


@pytest.mark.parametrize("view", sorted(_STRIDED))
@pytest.mark.parametrize("dtype", ["float32", "int8", "float64",
                                   "complex64", "int16"])
def test_round_trip_non_contiguous(client, dtype, view):
  base = _array(np.dtype(dtype), (4, 6))
  array = _STRIDED[view](base)
  assert not array.flags.c_contiguous
  buffer = _transfer(client, array)
  assert buffer.shape == array.shape
  _assert_same(buffer.to_numpy(), array)


def test_buffer_on_every_device(client):
  for device in client.addressable_devices():
    array = np.arange(6, dtype=np.float32) + device.id
    buffer = client.buffer_from_numpy(array, device)
    assert buffer.device == device
    assert buffer.memory in device.memories()
    _assert_same(buffer.to_numpy(), array)


def test_buffer_in_every_memory(client):
  device = client.addressable_devices()[0]
  for memory in device.memories():
    array = np.arange(5, dtype=np.int32)
    try:
      buffer = client.buffer_from_numpy(array, memory=memory)
    except support.XlaError as e:
      assert harness.error_code(e) in _UNSUPPORTED_CODES, e
      continue
    assert buffer.memory == memory
    _assert_same(buffer.to_numpy(), array)


def test_on_device_size(client):
  array = np.ones((3, 5), np.float32)
  buffer = client.buffer_from_numpy(array)
  try:
    size = buffer.on_device_size_in_bytes
  except support.UnimplementedError:
    pytest.skip("no PJRT_Buffer_OnDeviceSizeInBytes")
  assert size >= array.nbytes


def test_is_deleted(client):
  buffer = client.buffer_from_numpy(np.ones(4, np.float32))
  assert not buffer.is_deleted
  buffer.delete()
  assert buffer.is_deleted


def test_to_numpy_after_delete_is_an_error(probe):
  harness.expect_error(probe("buffer.to_numpy_after_delete"),
                       harness.BAD_INPUT_CODES)


def test_delete_twice(probe):
  result = probe("buffer.delete_twice")
  harness.expect_no_crash(result)
  if result.outcome == "ok":
    assert result.value is True


def test_ready_event_after_delete(probe):
  harness.expect_no_crash(probe("buffer.ready_event_after_delete"))


def test_execute_with_deleted_argument_is_an_error(probe):
  harness.expect_error(probe("buffer.execute_with_deleted_argument"),
                       harness.BAD_INPUT_CODES)


# -- Ready events. -----------------------------------------------------------


def test_ready_event(client):
  buffer = client.buffer_from_numpy(np.ones(4, np.float32))
  event = buffer.ready()
  event.wait()
  assert event.is_ready()
  assert event.error() is None
  event.wait()  # Waiting again on a ready event returns at once.
  event.close()
  assert buffer.block_until_ready() is buffer


def test_ready_event_on_ready(client):
  buffer = client.buffer_from_numpy(np.ones(4, np.float32))
  event = buffer.ready()
  fired = threading.Event()
  errors = []
  event.on_ready(lambda error: (errors.append(error), fired.set()))
  assert fired.wait(30), "the OnReady callback never ran"
  assert errors == [None]
  # A callback registered after the event is ready runs too.
  again = threading.Event()
  event.on_ready(lambda error: again.set())
  assert again.wait(30)
  event.close()


def test_several_ready_events_of_one_buffer(client):
  buffer = client.buffer_from_numpy(np.ones(4, np.float32))
  events = [buffer.ready() for _ in range(3)]
  for event in events:
    event.wait()
    assert event.is_ready()
    event.close()
