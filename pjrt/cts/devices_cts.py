"""Conformance: devices, lookup by id, memories, default device assignment."""

import pytest

import support
from pjrt.cts import harness

_LOOKUP_CODES = {support.StatusCode.INVALID_ARGUMENT,
                 support.StatusCode.NOT_FOUND}


def test_devices(client):
  devices = client.devices()
  assert devices, "the client has no devices"
  ids = [d.id for d in devices]
  assert len(set(ids)) == len(ids), f"device ids are not unique: {ids}"
  assert all(i >= 0 for i in ids), ids


def test_addressable_devices(client):
  devices = client.devices()
  addressable = client.addressable_devices()
  assert addressable, "the client has no addressable devices"
  assert set(addressable) <= set(devices)
  for device in devices:
    assert device.is_addressable == (device in addressable)
  for device in addressable:
    assert device.process_index == client.process_index


def test_device_descriptions(client):
  for device in client.devices():
    assert device.kind, f"device {device.id} has an empty kind"
    assert isinstance(device.debug_string, str)
    assert isinstance(device.to_string(), str)
    assert isinstance(device.attributes, dict)  # Unique names, valid types.


def test_local_hardware_ids_are_unique(client):
  ids = [d.local_hardware_id for d in client.addressable_devices()]
  known = [i for i in ids if i >= 0]  # -1: the plugin does not know.
  assert len(set(known)) == len(known), ids


def test_lookup_device(client):
  for device in client.devices():
    assert client.lookup_device(device.id) == device


def test_lookup_addressable_device(client):
  if not client.plugin.has("Client_LookupAddressableDevice"):
    pytest.skip("no PJRT_Client_LookupAddressableDevice")
  for device in client.addressable_devices():
    if device.local_hardware_id >= 0:
      found = client.lookup_addressable_device(device.local_hardware_id)
      assert found == device


@pytest.mark.parametrize("name", [
    "device.lookup_negative_id",
    "device.lookup_id_past_last",
    "device.lookup_huge_id",
    "device.lookup_addressable_negative_id",
    "device.lookup_addressable_id_past_last",
], ids=harness.probe_id)
def test_lookup_bad_id_is_an_error(probe, name):
  harness.expect_error(probe(name), _LOOKUP_CODES)


def test_memories(client):
  every = set(client.memories())
  for device in client.addressable_devices():
    memories = device.memories()
    assert memories, f"device {device.id} has no memories"
    assert set(memories) <= every
    default = device.default_memory()
    assert default in memories
    assert device in default.addressable_by_devices()
    for memory in memories:
      assert memory.kind, "a memory has an empty kind"
      assert isinstance(memory.id, int)


# -- Default device assignment. --------------------------------------------


def test_default_device_assignment_one_device(client):
  assignment = client.default_device_assignment(1, 1)
  assert len(assignment) == 1 and len(assignment[0]) == 1
  assert assignment[0][0] in {d.id for d in client.devices()}


def test_default_device_assignment_all_devices(client):
  n = len(client.devices())
  ids = {d.id for d in client.devices()}
  assignment = client.default_device_assignment(n, 1)
  assert len(assignment) == n
  assert all(len(row) == 1 for row in assignment)
  used = [row[0] for row in assignment]
  assert sorted(used) == sorted(ids), (
      f"{n} replicas must use the {n} devices once each, got {assignment}")


def test_default_device_assignment_replicas_and_partitions(client):
  n = len(client.devices())
  if n < 2 or n % 2:
    pytest.skip("needs an even number of devices")
  assignment = client.default_device_assignment(n // 2, 2)
  used = [i for row in assignment for i in row]
  assert len(assignment) == n // 2 and all(len(r) == 2 for r in assignment)
  assert sorted(used) == sorted(d.id for d in client.devices())


@pytest.mark.parametrize("name", [
    "assignment.more_replicas_than_devices",
    "assignment.more_partitions_than_devices",
    "assignment.zero_replicas",
    "assignment.zero_partitions",
], ids=harness.probe_id)
def test_default_device_assignment_impossible(probe, name):
  harness.expect_error(probe(name), harness.BAD_INPUT_CODES)
