"""Tests of native_slots.py: the query slots answered from mirror records.

Each check calls the slot through the plugin's PJRT_Api table (the native
fast path where native code is available) and compares with what the
Python objects say; the error cases must still come back as PJRT_Errors
from the Python implementation.
"""

import ctypes

import numpy as np
import pytest

from pjrt._src import abi
from pjrt._src.plugin import api
from pjrt._src.plugin import events
from pjrt._src.plugin import handles
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


def _call(name, **fields):
  """Calls slot `name` through the API table; (args, error address)."""
  args = abi.make_args(abi.args_type(name), **fields)
  fn = abi.function_type(name)(getattr(api.get_api(), "PJRT_" + name))
  return args, fn(ctypes.byref(args))


def _error_code(error) -> int:
  args, _ = _call("Error_GetCode", error=error)
  code = args.code
  _call("Error_Destroy", error=error)
  return code


@pytest.fixture(name="client")
def _client():
  c = testing.client(num_devices=1)
  yield c
  c.close()


def test_fast_paths_are_installed():
  table = api.get_api()
  fast = set(native_slots.slots())
  assert {"Buffer_IsDeleted", "Event_OnReady",
          "Executable_NumOutputs"} <= fast
  if api.fast_paths_enabled():
    # A fast path is its own function, not the slot's trampoline.
    from pjrt._src.plugin import native  # pylint: disable=g-import-not-at-top
    assert (table.PJRT_Buffer_IsDeleted !=
            native.address("slot:Buffer_IsDeleted"))


def test_buffer_queries_match_the_buffer(client):
  x = client.buffer_from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
  buffer = handles.TABLE.get(x.handle, runtime.BUFFER)
  args, error = _call("Buffer_Device", buffer=x.handle)
  assert not error and args.device == buffer.device.handle
  args, error = _call("Buffer_Memory", buffer=x.handle)
  assert not error and args.memory == buffer.memory.handle
  args, error = _call("Buffer_ElementType", buffer=x.handle)
  assert not error and args.type == int(abi.BufferType.F32)
  args, error = _call("Buffer_IsDeleted", buffer=x.handle)
  assert not error and args.is_deleted is False
  args, error = _call("Buffer_ReadyEvent", buffer=x.handle)
  assert not error and args.event == events.ready_event()
  _call("Buffer_Delete", buffer=x.handle)
  args, error = _call("Buffer_IsDeleted", buffer=x.handle)
  assert not error and args.is_deleted is True
  # A deleted buffer's ready event is an error event (Python path).
  args, error = _call("Buffer_ReadyEvent", buffer=x.handle)
  assert not error and args.event != events.ready_event()
  _, error = _call("Event_Error", event=args.event)
  assert error and _error_code(error) == 3  # INVALID_ARGUMENT
  _call("Event_Destroy", event=args.event)
  x.close()


def test_executable_and_memory_queries(client):
  exe = client.compile(_ADD_ONE)
  args, error = _call("LoadedExecutable_GetExecutable",
                      loaded_executable=exe.handle)
  assert not error
  executable = args.executable
  for slot, field, want in (("Executable_NumReplicas", "num_replicas", 1),
                            ("Executable_NumPartitions", "num_partitions",
                             1),
                            ("Executable_NumOutputs", "num_outputs", 1)):
    out, error = _call(slot, executable=executable)
    assert not error and getattr(out, field) == want
  _call("Executable_Destroy", executable=executable)
  memory = handles.TABLE.get(client.devices()[0].handle,
                             runtime.DEVICE).default_memory
  out, error = _call("Memory_Kind", memory=memory.handle)
  assert not error
  assert ctypes.string_at(out.kind, out.kind_size) == b"device"
  exe.close()


def test_ready_event_slots():
  event = events.ready_event()
  args, error = _call("Event_IsReady", event=event)
  assert not error and args.is_ready is True
  _, error = _call("Event_Error", event=event)
  assert not error
  _, error = _call("Event_Await", event=event)
  assert not error
  seen = []
  callback_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
  callback = callback_type(lambda err, arg: seen.append((err, arg)))
  _, error = _call("Event_OnReady", event=event,
                   callback=ctypes.cast(callback, ctypes.c_void_p).value,
                   user_arg=1234)
  assert not error and seen == [(None, 1234)]
  _, error = _call("Event_Destroy", event=event)
  assert not error
  # Destroying the shared event does nothing: it still answers.
  args, error = _call("Event_IsReady", event=event)
  assert not error and args.is_ready is True


@pytest.mark.parametrize("slot,field", [
    ("Buffer_IsDeleted", "buffer"), ("Buffer_Device", "buffer"),
    ("Executable_NumOutputs", "executable"), ("Memory_Kind", "memory"),
    ("Event_IsReady", "event"), ("Event_OnReady", "event")])
def test_bad_handles_still_give_errors(client, slot, field):
  x = client.buffer_from_numpy(np.zeros(2, np.float32))
  # NULL, a handle of another type, and a destroyed one.
  gone = client.buffer_from_numpy(np.zeros(2, np.float32))
  stale = gone.handle
  gone.close()
  other = (x.handle if field != "buffer" else
           client.devices()[0].handle)
  for bad in (0, other, stale):
    _, error = _call(slot, **{field: bad})
    assert error, (slot, bad)
    assert _error_code(error) == 3  # INVALID_ARGUMENT
  x.close()


def test_short_struct_size_is_an_error(client):
  x = client.buffer_from_numpy(np.zeros(2, np.float32))
  args = abi.make_args(abi.PJRT_Buffer_IsDeleted_Args, buffer=x.handle)
  args.struct_size = 16
  fn = abi.function_type("Buffer_IsDeleted")(
      api.get_api().PJRT_Buffer_IsDeleted)
  error = fn(ctypes.byref(args))
  assert error and _error_code(error) == 3
  null_error = fn(None)  # NULL args: an error too.
  assert null_error and _error_code(null_error) == 3
  x.close()


def test_records_carry_tags_and_fields(client):
  x = client.buffer_from_numpy(np.zeros(3, np.int32))
  buffer = handles.TABLE.get(x.handle, runtime.BUFFER)
  assert handles.TABLE.word(x.handle, 0) == 0
  assert handles.TABLE.word(x.handle, handles.TAG_WORD) == handles.tag(
      runtime.BUFFER)
  state = native_slots.word(native_slots.BUFFER_WORDS, "state")
  device = native_slots.word(native_slots.BUFFER_WORDS, "device")
  assert handles.TABLE.word(x.handle, state) == native_slots.BUFFER_READY
  assert handles.TABLE.word(x.handle, device) == buffer.device.handle
  address = x.handle
  x.close()  # Buffer_Destroy clears the tag.
  assert handles.TABLE.word(address, handles.TAG_WORD) == 0
