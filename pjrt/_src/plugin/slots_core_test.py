"""Tests of slots_core.py: errors, plugin attributes, events, contexts."""

import ctypes
import threading

import pytest

import pjrt
import support
from pjrt._src import abi
from pjrt._src.plugin import slots_core
from pjrt._src.plugin import testing
from stablehlo.vhlo import version


@pytest.fixture(name="client")
def _client():
  c = testing.client(num_devices=1)
  yield c
  c.close()


def test_plugin_attributes():
  attributes = testing.plugin().attributes()
  current, minimum = version.CURRENT, version.MINIMUM
  assert attributes["stablehlo_current_version"] == [
      current.major, current.minor, current.patch]
  assert attributes["stablehlo_minimum_version"] == [
      minimum.major, minimum.minor, minimum.patch]
  assert attributes["xla_version"] == slots_core.XLA_VERSION
  assert attributes["supports_executable_serialization"] is True


def test_errors_carry_code_and_message(client):
  with pytest.raises(support.InvalidArgumentError, match="no device with id"):
    client.lookup_device(99)


def test_event_create_and_set(client):
  event = pjrt.Event(client.plugin,
                     testing.call(client, "Event_Create").event)
  assert not event.is_ready()
  seen = []
  fired = threading.Event()
  event.on_ready(lambda error: (seen.append(error), fired.set()))
  message = b"cancelled by test"
  testing.call(client, "Event_Set", event=event._handle,  # pylint: disable=protected-access
               error_code=support.StatusCode.CANCELLED,
               error_message=message, error_message_size=len(message))
  assert fired.wait(10)
  assert isinstance(seen[0], support.CancelledError)
  assert str(seen[0]) == "cancelled by test"
  with pytest.raises(support.CancelledError):
    event.wait()
  with pytest.raises(support.FailedPreconditionError, match="already"):
    testing.call(client, "Event_Set", event=event._handle, error_code=0)  # pylint: disable=protected-access
  event.close()


def test_event_set_ok(client):
  event = pjrt.Event(client.plugin,
                     testing.call(client, "Event_Create").event)
  testing.call(client, "Event_Set", event=event._handle, error_code=0)  # pylint: disable=protected-access
  event.wait()
  assert event.error() is None


def test_destroyed_event_is_an_error(client):
  handle = testing.call(client, "Event_Create").event
  testing.call(client, "Event_Destroy", event=handle)
  with pytest.raises(support.InvalidArgumentError, match="PJRT_Event"):
    testing.call(client, "Event_IsReady", event=handle)
  testing.call(client, "Event_Destroy", event=None)  # NULL is allowed.


def test_execute_context(client):
  context = testing.call(client, "ExecuteContext_Create").context
  assert context
  testing.call(client, "ExecuteContext_Destroy", context=context)
  with pytest.raises(support.InvalidArgumentError):
    testing.call(client, "ExecuteContext_Destroy", context=context)


def test_for_each_payload_needs_a_visitor(client):
  # A real PJRT_Error of ours, from a failing call, taken raw.
  args = abi.make_args(abi.PJRT_Client_LookupDevice_Args,
                       client=client.handle, id=99)
  error = client.plugin.function("Client_LookupDevice")(ctypes.byref(args))
  assert error
  try:
    with pytest.raises(support.InvalidArgumentError, match="visitor"):
      testing.call(client, "Error_ForEachPayload", error=error,
                   visitor=None)
  finally:
    testing.call(client, "Error_Destroy", error=error)
