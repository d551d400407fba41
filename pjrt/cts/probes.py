"""Crash-prone conformance cases, run in a child process (see harness.py).

A probe is a function `probe(client) -> JSON value` registered under a name.
`python -m pjrt.cts.probes NAME...` loads the plugin named by
`PJRT_CTS_PLUGIN`, creates one client and runs the probes in order, writing
one marked JSON line before each probe starts and one with its result, so
that the parent can tell which probe a crash happened in.

The probes only *do* things; what counts as conformant is asserted by the
test modules that read the results.
"""

from __future__ import annotations

import ctypes

import json
import sys
import traceback
from typing import Any, Callable

import numpy as np

import pjrt
import support
from pjrt.cts import harness
from pjrt.cts import programs

PROBES: dict[str, Callable[[pjrt.Client], Any]] = {}


def probe(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
  def register(fn):
    if name in PROBES:
      raise ValueError(f"duplicate probe {name!r}")
    PROBES[name] = fn
    return fn
  return register


def _ones(client: pjrt.Client, shape=(4,), dtype=np.float32, device=None):
  return client.buffer_from_numpy(np.ones(shape, dtype), device)


def _max_device_id(client: pjrt.Client) -> int:
  return max(d.id for d in client.devices())


# -- API: argument structs. ------------------------------------------------


def _platform_name_with_struct_size(client: pjrt.Client, size: int) -> str:
  args = pjrt.abi.make_args(pjrt.abi.PJRT_Client_PlatformName_Args,
                            client=client.handle)
  args.struct_size = size
  client.plugin.call("Client_PlatformName", args)
  return f"accepted struct_size {size}"


@probe("api.args_struct_size_too_small")
def _(client):
  return _platform_name_with_struct_size(client, 8)


@probe("api.args_struct_size_zero")
def _(client):
  return _platform_name_with_struct_size(client, 0)


# -- Devices. --------------------------------------------------------------


@probe("device.lookup_negative_id")
def _(client):
  return client.lookup_device(-1).id


@probe("device.lookup_id_past_last")
def _(client):
  return client.lookup_device(_max_device_id(client) + 1).id


@probe("device.lookup_huge_id")
def _(client):
  return client.lookup_device(2**31 - 1).id


@probe("device.lookup_addressable_negative_id")
def _(client):
  return client.lookup_addressable_device(-1).id


@probe("device.lookup_addressable_id_past_last")
def _(client):
  last = max(d.local_hardware_id for d in client.addressable_devices())
  return client.lookup_addressable_device(last + 1).id


@probe("assignment.more_replicas_than_devices")
def _(client):
  return client.default_device_assignment(len(client.devices()) + 1, 1)


@probe("assignment.more_partitions_than_devices")
def _(client):
  return client.default_device_assignment(1, len(client.devices()) + 1)


def _raw_assignment(client, replicas: int, partitions: int):
  """Asks the plugin directly: the client rejects zero counts itself, and
  the suite is about what the plugin does with them."""
  out = (ctypes.c_int * 1)()
  client.plugin.call("Client_DefaultDeviceAssignment", client=client.handle,
                     num_replicas=replicas, num_partitions=partitions,
                     default_assignment_size=0, default_assignment=out)
  return list(out)


@probe("assignment.zero_replicas")
def _(client):
  return _raw_assignment(client, 0, 1)


@probe("assignment.zero_partitions")
def _(client):
  return _raw_assignment(client, 1, 0)


# -- Buffers after delete. -------------------------------------------------


def _deleted(client: pjrt.Client) -> pjrt.Buffer:
  buffer = _ones(client)
  buffer.delete()
  return buffer


@probe("buffer.to_numpy_after_delete")
def _(client):
  return _deleted(client).to_numpy().tolist()


@probe("buffer.delete_twice")
def _(client):
  buffer = _deleted(client)
  buffer.delete()
  return buffer.is_deleted


@probe("buffer.ready_event_after_delete")
def _(client):
  _deleted(client).ready().wait()
  return "ready"


@probe("buffer.execute_with_deleted_argument")
def _(client):
  executable = client.compile(programs.ADD_F32)
  live, dead = _ones(client), _deleted(client)
  (out,) = executable.execute([live, dead])
  return out.to_numpy().tolist()


# -- Compile errors. -------------------------------------------------------


def _compile(client, program, **kwargs) -> str:
  client.compile(program, **kwargs)
  return "compiled"


for _name, _program in [
    ("compile.empty_program", ""),
    ("compile.not_mlir", programs.NOT_MLIR),
    ("compile.binary_garbage", programs.BINARY_GARBAGE),
    ("compile.no_main", programs.NO_MAIN),
    ("compile.unknown_op", programs.UNKNOWN_OP),
    ("compile.shape_mismatch", programs.SHAPE_MISMATCH),
    ("compile.wrong_return_type", programs.WRONG_RETURN_TYPE),
]:
  probe(_name)(lambda client, p=_program: _compile(client, p))


@probe("compile.unknown_format")
def _(client):
  return _compile(client, programs.ADD_F32, format="no_such_format")


@probe("compile.empty_format")
def _(client):
  return _compile(client, programs.ADD_F32, format="")


@probe("compile.hlo_format_with_mlir_code")
def _(client):
  return _compile(client, programs.ADD_F32, format="hlo")


@probe("compile.garbage_options")
def _(client):
  return _compile(client, programs.ADD_F32,
                  compile_options=b"\xff\xff\xff\xff")


@probe("compile.more_replicas_than_devices")
def _(client):
  options = pjrt.compile_options(num_replicas=len(client.devices()) + 1)
  return _compile(client, programs.ADD_F32, compile_options=options)


@probe("compile.zero_replicas")
def _(client):
  options = pjrt.compile_options(num_replicas=0)
  return _compile(client, programs.ADD_F32, compile_options=options)


@probe("compile.unknown_device_in_assignment")
def _(client):
  options = pjrt.compile_options(
      device_assignment=[[_max_device_id(client) + 1000]])
  return _compile(client, programs.ADD_F32, compile_options=options)


# -- Execute errors. -------------------------------------------------------


def _execute_add(client, arguments) -> list[Any]:
  (out,) = client.compile(programs.ADD_F32).execute(arguments)
  return out.to_numpy().tolist()


@probe("execute.too_few_arguments")
def _(client):
  return _execute_add(client, [_ones(client)])


@probe("execute.too_many_arguments")
def _(client):
  return _execute_add(client, [_ones(client)] * 3)


@probe("execute.no_arguments")
def _(client):
  return _execute_add(client, [])


@probe("execute.wrong_shape")
def _(client):
  return _execute_add(client, [_ones(client), _ones(client, (3,))])


@probe("execute.wrong_rank")
def _(client):
  return _execute_add(client, [_ones(client), _ones(client, (2, 2))])


@probe("execute.wrong_dtype")
def _(client):
  return _execute_add(client, [_ones(client), _ones(client, dtype=np.int32)])


@probe("execute.argument_on_other_device")
def _(client):
  devices = client.addressable_devices()
  if len(devices) < 2:
    return "skip: one addressable device"
  return _execute_add(client, [_ones(client, device=devices[0]),
                               _ones(client, device=devices[1])])


@probe("execute.argument_of_other_client")
def _(client):
  with pjrt.Client(client.plugin) as other:
    foreign = _ones(other)
    return _execute_add(client, [_ones(client), foreign])


# --------------------------------------------------------------------------
# The child process.


def _emit(record: dict[str, Any]) -> None:
  sys.stdout.write(harness.PROBE_MARKER + json.dumps(record) + "\n")
  sys.stdout.flush()


def _jsonable(value: Any) -> Any:
  try:
    json.dumps(value)
    return value
  except (TypeError, ValueError):
    return repr(value)


def run_one(client: pjrt.Client, name: str) -> dict[str, Any]:
  """Runs probe `name`; returns its result record (see ProbeResult)."""
  try:
    value = PROBES[name](client)
  except support.XlaError as e:
    return {"name": name, "outcome": "error", "code": int(e.code),
            "error_type": type(e).__name__, "message": str(e)}
  except Exception as e:  # pylint: disable=broad-except
    return {"name": name, "outcome": "exception",
            "error_type": type(e).__name__,
            "message": "".join(traceback.format_exception(e))}
  return {"name": name, "outcome": "ok", "value": _jsonable(value)}


def main(names: list[str]) -> int:
  unknown = [n for n in names if n not in PROBES]
  if unknown:
    print(f"unknown probes: {', '.join(unknown)}", file=sys.stderr)
    return 2
  choice = harness.plugin_choice()
  if choice is None:
    print(f"{harness.PLUGIN_ENV} is not set", file=sys.stderr)
    return 2
  client = pjrt.Client(harness.load(choice))
  for name in names:
    _emit({"start": name})
    _emit(run_one(client, name))
  client.close()
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
