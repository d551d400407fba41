"""Tests of handles.py: typed, checked handles that are real memory."""

import ctypes

import pytest

import support
from pjrt._src.plugin import handles


def test_add_get_remove():
  table = handles.HandleTable()
  obj = object()
  address = table.add("PJRT_Buffer", obj)
  assert address and address % ctypes.sizeof(ctypes.c_void_p) == 0
  assert table.get(address, "PJRT_Buffer") is obj
  assert table.count("PJRT_Buffer") == 1
  assert table.remove(address, "PJRT_Buffer") is obj
  assert len(table) == 0


def test_handles_point_at_zeroed_memory():
  # A caller may read the first word (a vtable pointer in newer headers).
  table = handles.HandleTable()
  address = table.add("PJRT_Memory", object())
  assert ctypes.c_void_p.from_address(address).value is None


@pytest.mark.parametrize("address", [0, None, 12345678])
def test_unknown_or_null_handle_is_an_error(address):
  table = handles.HandleTable()
  with pytest.raises(support.InvalidArgumentError):
    table.get(address, "PJRT_Buffer")


def test_wrong_type_is_an_error():
  table = handles.HandleTable()
  address = table.add("PJRT_Device", object())
  with pytest.raises(support.InvalidArgumentError, match="is a PJRT_Device"):
    table.get(address, "PJRT_Buffer")


def test_destroyed_handle_is_an_error_and_not_reused_soon():
  table = handles.HandleTable(quarantine=4)
  first = table.add("PJRT_Buffer", object())
  table.remove(first, "PJRT_Buffer")
  with pytest.raises(support.InvalidArgumentError, match="not a live"):
    table.get(first, "PJRT_Buffer")
  with pytest.raises(support.InvalidArgumentError):
    table.remove(first, "PJRT_Buffer")
  later = [table.add("PJRT_Buffer", object()) for _ in range(4)]
  assert first not in later  # Still in quarantine.


def test_freed_slots_are_reused_after_quarantine():
  table = handles.HandleTable(quarantine=2)
  freed = []
  for _ in range(3):
    address = table.add("PJRT_Event", object())
    table.remove(address, "PJRT_Event")
    freed.append(address)
  assert table.add("PJRT_Event", object()) == freed[0]


def test_a_handle_removed_while_the_table_is_locked_does_not_deadlock():
  # An adoption runs under the table's lock and may allocate; a garbage
  # collection there can finalize an object whose finalizer removes its own
  # handle, on the same thread. That must not wait for the lock forever.
  import threading  # pylint: disable=g-import-not-at-top
  table = handles.HandleTable(region_records=1024)
  other = table.add("TestObject", object())
  adopted = object()
  removed = []

  def adopter(address):
    removed.append(table.remove(other, "TestObject"))  # as a finalizer
    return ("TestObject", adopted)
  table.adopter = adopter
  address = table.native_start
  done = threading.Event()
  result = []

  def run():
    result.append(table.get(address, "TestObject"))
    done.set()
  threading.Thread(target=run, daemon=True).start()
  assert done.wait(10), "the table's lock deadlocked"
  assert result == [adopted] and len(removed) == 1
  with pytest.raises(support.InvalidArgumentError):
    table.get(other, "TestObject")
