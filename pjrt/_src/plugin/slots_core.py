"""Slots: PJRT_Error_*, PJRT_Plugin_*, PJRT_Event_*, PJRT_ExecuteContext_*."""

from __future__ import annotations

import ctypes
import threading

import support
from pjrt._src import abi
from pjrt._src.plugin import cabi
from pjrt._src.plugin import errors
from pjrt._src.plugin import events
from pjrt._src.plugin import handles
from pjrt._src.plugin.slot_registry import implements

# The XLA-level feature version frameworks may compare (PJRT plugin
# attribute "xla_version"); ours counts our own plugin's revisions.
XLA_VERSION = 1

# -- Errors. -------------------------------------------------------------------


@implements("Error_Destroy")
def _error_destroy(args):
  errors.destroy(args.error)


@implements("Error_Message")
def _error_message(args):
  record = errors.get(args.error)
  args.message = record.message_address
  args.message_size = record.size


@implements("Error_GetCode")
def _error_get_code(args):
  args.code = errors.get(args.error).code


@implements("Error_ForEachPayload")
def _error_for_each_payload(args):
  errors.get(args.error)
  if not args.visitor:
    raise support.InvalidArgumentError(
        "PJRT_Error_ForEachPayload: visitor is NULL")
  # Our errors have no payloads: the visitor is never called.


# -- Plugin. -------------------------------------------------------------------

_attributes_lock = threading.Lock()
_attributes = None


def plugin_attributes() -> dict:
  """The plugin attributes (PJRT_Plugin_Attributes), as Python values."""
  from stablehlo.vhlo import version  # pylint: disable=g-import-not-at-top
  current, minimum = version.CURRENT, version.MINIMUM
  return {
      "xla_version": XLA_VERSION,
      "stablehlo_current_version": [current.major, current.minor,
                                    current.patch],
      "stablehlo_minimum_version": [minimum.major, minimum.minor,
                                    minimum.patch],
      "supports_executable_serialization": True,
  }


@implements("Plugin_Initialize")
def _plugin_initialize(args):
  del args  # Nothing to set up: clients start their own state.


@implements("Plugin_Attributes")
def _plugin_attributes(args):
  global _attributes
  with _attributes_lock:
    if _attributes is None:
      _attributes = cabi.named_value_array(plugin_attributes())
    count = len(plugin_attributes())
  args.attributes = ctypes.cast(_attributes, abi.NAMED_VALUE_P)
  args.num_attributes = count


# -- Events. -------------------------------------------------------------------


@implements("Event_Destroy")
def _event_destroy(args):
  if args.event:
    events.destroy(args.event)


@implements("Event_IsReady")
def _event_is_ready(args):
  args.is_ready = events.get(args.event).is_ready()


@implements("Event_Error")
def _event_error(args):
  status = events.get(args.event).wait()
  if status is not None:
    raise support.error_for_code(support.StatusCode(status[0]), status[1])


@implements("Event_Await")
def _event_await(args):
  events.get(args.event).raise_if_error()


@implements("Event_OnReady")
def _event_on_ready(args):
  future = events.get(args.event)
  if not args.callback:
    raise support.InvalidArgumentError("PJRT_Event_OnReady: callback is NULL")
  function, user_arg = args.callback, args.user_arg
  future.add_callback(
      lambda status: events.call_c_callback(function, user_arg, status))


@implements("Event_Create")
def _event_create(args):
  args.event = events.new_event(events.Future())


@implements("Event_Set")
def _event_set(args):
  future = events.get(args.event)
  code = int(args.error_code)
  status = None
  if code != support.StatusCode.OK:
    status = (code, cabi.string(args.error_message, args.error_message_size))
  if not future.set(status):
    raise support.FailedPreconditionError("the PJRT_Event was already set")


# -- Execute contexts. ---------------------------------------------------------

EXECUTE_CONTEXT = "PJRT_ExecuteContext"


class ExecuteContext:
  """A PJRT_ExecuteContext; carries nothing our executions use."""


@implements("ExecuteContext_Create")
def _execute_context_create(args):
  args.context = handles.TABLE.add(EXECUTE_CONTEXT, ExecuteContext())


@implements("ExecuteContext_Destroy")
def _execute_context_destroy(args):
  if args.context:
    handles.TABLE.remove(args.context, EXECUTE_CONTEXT)
