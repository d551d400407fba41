"""Tests of native_execute.py: Execute and Buffer_Destroy without Python.

Each test runs through pjrt.Client on the cpu backend, so calls go through
the plugin's PJRT_Api table as a framework's would; the native range of
the handle table tells a buffer made natively from one made by Python.
"""

import ctypes
import threading

import numpy as np
import pytest

import support
from pjrt._src.plugin import api
from pjrt._src.plugin import handles
from pjrt._src.plugin import native_execute
from pjrt._src.plugin import native_slots
from pjrt._src.plugin import runtime
from pjrt._src.plugin import testing

_ADD_ONE = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<4xf32>
  %0 = stablehlo.add %x, %one : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

_TWO_RESULTS = """
func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xi32>)
    -> (tensor<2x3xf32>, tensor<3xi32>, tensor<3xi32>) {
  %0 = stablehlo.multiply %x, %x : tensor<2x3xf32>
  return %0, %y, %y : tensor<2x3xf32>, tensor<3xi32>, tensor<3xi32>
}
"""

_DONATING = """
func.func @main(%x: tensor<4xf32> {tf.aliasing_output = 0 : i32})
    -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


_DONATING_TWO = """
func.func @main(%x: tensor<4xf32> {tf.aliasing_output = 0 : i32},
                %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %y : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def _word(address: int, name: str) -> int:
  return handles.TABLE.word(address,
                            native_slots.word(native_slots.BUFFER_WORDS,
                                              name))


def _is_native(address: int) -> bool:
  return handles.TABLE.native_start <= address < handles.TABLE.native_end


@pytest.fixture(name="client")
def _client():
  if not (api.fast_paths_enabled() and api.get_api() and
          native_execute.enabled()):
    pytest.skip("native execution is off")
  c = testing.client(backend="cpu", num_devices=1)
  yield c
  c.close()


def test_calls_after_the_first_run_natively(client):
  exe = client.compile(_ADD_ONE)
  x = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
  (first,) = exe.execute([x])  # Python: measures the run, arms.
  assert not _is_native(first.handle)
  (second,) = exe.execute([x])
  assert _is_native(second.handle)
  assert _word(second.handle, "owner") == native_slots.OWNER_NATIVE
  assert _word(x.handle, "holds") == 0
  # Reading it from Python adopts it: same handle, now Python's.
  np.testing.assert_array_equal(second.to_numpy(), np.arange(4) + 1)
  assert _word(second.handle, "owner") == native_slots.OWNER_PYTHON
  np.testing.assert_array_equal(first.to_numpy(), np.arange(4) + 1)
  for b in (first, second, x):
    b.close()
  exe.close()


def test_native_outputs_feed_native_calls(client):
  exe = client.compile(_ADD_ONE)
  x = client.buffer_from_numpy(np.zeros(4, np.float32))
  values = [x]
  for _ in range(5):
    (y,) = exe.execute([values[-1]])
    values.append(y)
  assert all(_is_native(v.handle) for v in values[2:])
  np.testing.assert_array_equal(values[-1].to_numpy(), np.full(4, 5.0))
  for v in values:
    v.close()
  exe.close()


def test_results_copied_from_arguments_and_repeated(client):
  exe = client.compile(_TWO_RESULTS)
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  y = np.array([7, 8, 9], np.int32)
  bx, by = client.buffer_from_numpy(x), client.buffer_from_numpy(y)
  for _ in range(3):
    outs = exe.execute([bx, by])
    native = _is_native(outs[0].handle)
    np.testing.assert_array_equal(outs[0].to_numpy(), x * x)
    np.testing.assert_array_equal(outs[1].to_numpy(), y)
    np.testing.assert_array_equal(outs[2].to_numpy(), y)
    assert len({o.handle for o in outs}) == 3
    for o in outs:
      o.close()
  assert native
  bx.close()
  by.close()
  exe.close()


def test_destroy_frees_natively_and_the_handle_goes_stale(client):
  exe = client.compile(_ADD_ONE)
  x = client.buffer_from_numpy(np.zeros(4, np.float32))
  exe.execute([x])[0].close()
  (y,) = exe.execute([x])
  handle = y.handle
  assert _is_native(handle)
  y.close()  # Native Buffer_Destroy: no adoption.
  assert handles.TABLE.word(handle, handles.TAG_WORD) == 0
  assert handles.TABLE.count(runtime.BUFFER) == 1  # x only
  args = testing.call  # Reading the stale handle is an error, not a crash.
  with pytest.raises(support.InvalidArgumentError):
    args(client, "Buffer_ElementType", buffer=handle)
  x.close()
  exe.close()


def test_bad_arguments_get_python_errors(client):
  exe = client.compile(_ADD_ONE)
  x = client.buffer_from_numpy(np.zeros(4, np.float32))
  exe.execute([x])[0].close()
  wrong = client.buffer_from_numpy(np.zeros(5, np.float32))
  with pytest.raises(support.InvalidArgumentError,
                     match=r"must be F32\[4\], got F32\[5\]"):
    exe.execute([wrong])
  x.delete()
  with pytest.raises(support.InvalidArgumentError, match="deleted"):
    exe.execute([x])
  wrong.close()
  x.close()
  exe.close()


def test_deleting_an_argument_waits_for_native_holds(client):
  x = client.buffer_from_numpy(np.zeros(4, np.float32))
  holds = native_slots.word(native_slots.BUFFER_WORDS, "holds")
  record = (ctypes.c_int64 * handles.RECORD_WORDS).from_address(x.handle)
  record[holds] = 1  # As a native execution reading x would.
  deleter = threading.Thread(target=x.delete)
  deleter.start()
  deleter.join(0.2)
  # The state left READY at once (no new native reader), and the delete
  # waits for the hold.
  assert _word(x.handle, "state") == native_slots.BUFFER_DELETED
  assert deleter.is_alive()
  record[holds] = 0
  deleter.join(10)
  assert not deleter.is_alive()
  x.close()


def test_interpreted_executables_stay_in_python(client):
  del client
  interpreter = testing.client(backend="interpreter", num_devices=1)
  exe = interpreter.compile(_ADD_ONE)
  loaded = handles.TABLE.get(exe.handle, "PJRT_LoadedExecutable")
  assert loaded.native is None
  exe.close()
  interpreter.close()


def test_donation_reuses_native_memory(client):
  exe = client.compile(_DONATING)
  x = client.buffer_from_numpy(np.ones(4, np.float32))
  values = [x]
  for _ in range(6):
    (y,) = exe.execute([values[-1]])
    values.append(y)
  for donor, result in zip(values[2:-1], values[3:]):
    assert _is_native(donor.handle) and _is_native(result.handle)
    assert donor.is_deleted
  # The result lives in the memory of the buffer donated to make it.
  data = _word(values[-1].handle, "data")
  (z,) = exe.execute([values[-1]])
  assert _word(z.handle, "data") == data
  assert _word(values[-1].handle, "data") == 0
  assert values[-1].is_deleted
  np.testing.assert_array_equal(z.to_numpy(), np.full(4, 128.0))
  with pytest.raises(support.InvalidArgumentError, match="deleted"):
    values[-1].to_numpy()
  for v in values + [z]:
    v.close()
  exe.close()


def test_donating_a_python_buffer_natively_deletes_it(client):
  exe = client.compile(_DONATING)
  warm = client.buffer_from_numpy(np.ones(4, np.float32))
  exe.execute([warm])[0].close()  # Arms the native path.
  x = client.buffer_from_numpy(np.full(4, 3.0, np.float32))
  x.to_numpy()  # Reading it from Python makes it a Python buffer.
  assert _word(x.handle, "owner") == native_slots.OWNER_PYTHON
  (y,) = exe.execute([x])
  assert _is_native(y.handle)
  assert x.is_deleted
  np.testing.assert_array_equal(y.to_numpy(), np.full(4, 6.0))
  with pytest.raises(support.InvalidArgumentError, match="deleted"):
    exe.execute([x])
  for b in (warm, x, y):
    b.close()
  exe.close()


def test_a_donated_buffer_passed_twice_is_an_error(client):
  # As in XLA's clients: the buffer would be read after its memory was
  # given to the result. The native path hands the call to Python, which
  # refuses it before anything is donated.
  exe = client.compile(_DONATING_TWO)
  warm = client.buffer_from_numpy(np.ones(4, np.float32))
  other = client.buffer_from_numpy(np.ones(4, np.float32))
  (x,) = exe.execute([warm, other])  # Arms the native path.
  (y,) = exe.execute([x, other])  # A native buffer now.
  for twice in (other, y):
    with pytest.raises(support.InvalidArgumentError,
                       match="donated.*passed only once"):
      exe.execute([twice, twice])
    assert not twice.is_deleted
  np.testing.assert_array_equal(y.to_numpy(), np.full(4, 3.0))
  for b in (warm, other, x, y):
    b.close()
  exe.close()


def test_python_buffers_mirror_data_and_shape(client):
  array = np.arange(6, dtype=np.int32).reshape(2, 3)
  x = client.buffer_from_numpy(array)
  buffer = handles.TABLE.get(x.handle, runtime.BUFFER)
  assert _word(x.handle, "data") == buffer.array().ctypes.data
  assert _word(x.handle, "shape_key") == native_slots.shape_key(
      buffer.element_type, (2, 3))
  assert native_slots.shape_key(buffer.element_type, (3, 2)) != _word(
      x.handle, "shape_key")
  x.close()


def test_native_buffers_answer_queries_without_python(client):
  exe = client.compile(_TWO_RESULTS)
  x = client.buffer_from_numpy(np.ones((2, 3), np.float32))
  y = client.buffer_from_numpy(np.arange(3, dtype=np.int32))
  for b in exe.execute([x, y]):
    b.close()
  out, ints, _ = exe.execute([x, y])
  handle = out.handle
  assert _is_native(handle)
  args = testing.call(client, "Buffer_Dimensions", buffer=handle)
  assert list(args.dims[:args.num_dims]) == [2, 3]
  args = testing.call(client, "Buffer_OnDeviceSizeInBytes", buffer=handle)
  assert args.on_device_size_in_bytes == 24
  args = testing.call(client, "Buffer_IsOnCpu", buffer=handle)
  assert args.is_on_cpu
  args = testing.call(client, "Buffer_OpaqueDeviceMemoryDataPointer",
                      buffer=handle)
  assert args.device_memory_ptr == _word(handle, "data") != 0
  assert _word(handle, "owner") == native_slots.OWNER_NATIVE  # Not adopted.
  got = np.ctypeslib.as_array(
      ctypes.cast(args.device_memory_ptr, ctypes.POINTER(ctypes.c_float)),
      (2, 3))
  np.testing.assert_array_equal(got, np.ones((2, 3)))
  for b in (out, ints, x, y):
    b.close()
  exe.close()


def test_external_references_carry_over_to_python(client):
  exe = client.compile(_ADD_ONE)
  x = client.buffer_from_numpy(np.zeros(4, np.float32))
  exe.execute([x])[0].close()
  (y,) = exe.execute([x])
  handle = y.handle
  testing.call(client, "Buffer_IncreaseExternalReferenceCount", buffer=handle)
  testing.call(client, "Buffer_IncreaseExternalReferenceCount", buffer=handle)
  testing.call(client, "Buffer_DecreaseExternalReferenceCount", buffer=handle)
  assert _word(handle, "external_refs") == 1
  assert _word(handle, "owner") == native_slots.OWNER_NATIVE
  # Python adopts it with its count (and so keeps the data while it is
  # referenced).
  buffer = handles.TABLE.get(handle, runtime.BUFFER)
  assert buffer._external_refs == 1  # pylint: disable=protected-access
  testing.call(client, "Buffer_DecreaseExternalReferenceCount", buffer=handle)
  with pytest.raises(support.FailedPreconditionError):
    testing.call(client, "Buffer_DecreaseExternalReferenceCount",
                 buffer=handle)
  np.testing.assert_array_equal(y.to_numpy(), np.ones(4))
  y.close()
  x.close()
  exe.close()


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.array(2.5, np.float64),                     # a scalar
    np.zeros((0, 3), np.int32),                    # empty
    np.array([True, False, True]),
    np.arange(24, dtype=np.int16).reshape(2, 3, 4)[:, ::2],  # strided
])
def test_host_transfers_round_trip(client, array):
  x = client.buffer_from_numpy(array)
  if array.flags.c_contiguous:
    assert _is_native(x.handle)  # Made by the native transfer.
    assert _word(x.handle, "shape_key") == 0
  np.testing.assert_array_equal(x.to_numpy(), array)
  x.close()


def test_memory_statistics_count_native_buffers(client):
  exe = client.compile(_ADD_ONE)
  device = client.devices()[0]

  def in_use():
    return testing.call(client, "Device_MemoryStats",
                        device=device.handle).bytes_in_use

  before = in_use()
  x = client.buffer_from_numpy(np.zeros(4, np.float32))
  assert _is_native(x.handle) and in_use() == before + 16
  exe.execute([x])[0].close()
  (y,) = exe.execute([x])
  assert _is_native(y.handle) and in_use() == before + 32
  y.to_numpy()  # Adopting it does not count it again.
  assert in_use() == before + 32
  y.close()
  x.close()
  assert in_use() == before
  exe.close()


def test_concurrent_native_executions_agree(client):
  """Threads running, donating and destroying at once: every result is
  right, and the records and holds balance in the end."""
  before = native_execute.native_buffer_count()
  python_before = handles.TABLE.count(runtime.BUFFER)
  add = client.compile(_ADD_ONE)
  donating = client.compile(_DONATING)
  warm = client.buffer_from_numpy(np.zeros(4, np.float32))
  for exe in (add, donating):
    for _ in range(2):
      exe.execute([client.buffer_from_numpy(np.zeros(4, np.float32))])[0].close()
  shared = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
  errors = []

  def work(seed):
    try:
      for i in range(200):
        (y,) = add.execute([shared])
        np.testing.assert_array_equal(y.to_numpy() if i % 50 == 0 else
                                      np.arange(4) + 1,
                                      np.arange(4) + 1)
        (z,) = donating.execute([y])  # y is donated: z = 2 * y
        if i % 20 == seed % 20:
          np.testing.assert_array_equal(z.to_numpy(),
                                        2 * (np.arange(4) + 1))
        y.close()
        z.close()
    except BaseException as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(60)
  assert not errors, errors[0]
  assert _word(shared.handle, "holds") == 0
  np.testing.assert_array_equal(shared.to_numpy(), np.arange(4))
  # warm (native) and shared (Python's since it was read) are all that is
  # left of 1600 results.
  assert native_execute.native_buffer_count() == before + 1
  assert handles.TABLE.count(runtime.BUFFER) == python_before + 1
  for b in (warm, shared):
    b.close()
  add.close()
  donating.close()
