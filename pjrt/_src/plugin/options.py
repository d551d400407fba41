"""Options of the plugin: client create options and compile options.

Client create options (PJRT_Client_Create's named values; each may also come
from an environment variable, and a create option wins over the variable):

  num_devices  OPENXLA_CPU_NUM_DEVICES  how many virtual CPU devices (1-256,
                                        default 1, as JAX's own CPU client
                                        has: programs written for "cpu"
                                        then see the same device list)
  backend      OPENXLA_CPU_BACKEND      what runs programs: "cpu" (our XLA
                                        CPU compiler), "evaluator" (XLA's HLO
                                        evaluator), "interpreter" (the
                                        StableHLO reference interpreter), or
                                        "auto" (default: "cpu" when it can be
                                        imported, else "interpreter")

Values may be given as strings ("4"), as JAX's
`jax_pjrt_client_create_options` passes them. Unknown options are an error
(a typo should not be ignored), except the distributed-runtime options JAX
passes for a one-process run (node_id 0, num_nodes 1).

Compile options arrive as a serialized xla.CompileOptionsProto; the fields
used are decoded here with the wire-format reader of compile_options.py.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import support
from pjrt._src import compile_options as co

NUM_DEVICES_ENV = "OPENXLA_CPU_NUM_DEVICES"
BACKEND_ENV = "OPENXLA_CPU_BACKEND"
DEFAULT_NUM_DEVICES = 1
MAX_DEVICES = 256
BACKENDS = ("auto", "cpu", "evaluator", "interpreter")

# Options JAX's distributed runtime passes; only a one-process run is ours.
_SINGLE_PROCESS_OPTIONS = {"node_id": 0, "num_nodes": 1}


@dataclasses.dataclass(frozen=True)
class ClientOptions:
  num_devices: int = DEFAULT_NUM_DEVICES
  backend: str = "auto"


def _as_int(name: str, value: Any) -> int:
  if isinstance(value, bool):
    raise support.InvalidArgumentError(
        f"create option {name!r} must be an integer, got {value!r}")
  if isinstance(value, int):
    return value
  if isinstance(value, str):
    try:
      return int(value.strip(), 10)
    except ValueError:
      pass
  raise support.InvalidArgumentError(
      f"create option {name!r} must be an integer, got {value!r}")


def client_options(named: dict[str, Any],
                   environ: dict[str, str] | None = None) -> ClientOptions:
  """Resolves create options > environment > defaults.

  Raises:
    support.InvalidArgumentError: an unknown option or a bad value.
    support.UnimplementedError: a multi-process setup.
  """
  environ = os.environ if environ is None else environ
  named = dict(named)
  for name, single in _SINGLE_PROCESS_OPTIONS.items():
    if name in named:
      value = _as_int(name, named.pop(name))
      if value != single:
        raise support.UnimplementedError(
            f"the openxla_cpu plugin runs in one process; create option "
            f"{name}={value} asks for a multi-process client")
  unknown = sorted(set(named) - {"num_devices", "backend"})
  if unknown:
    raise support.InvalidArgumentError(
        f"unknown create option(s) {', '.join(unknown)} (known: backend, "
        "num_devices)")
  raw = named.get("num_devices", environ.get(NUM_DEVICES_ENV))
  num_devices = (DEFAULT_NUM_DEVICES if raw in (None, "") else
                 _as_int("num_devices", raw))
  if not 1 <= num_devices <= MAX_DEVICES:
    raise support.InvalidArgumentError(
        f"num_devices must be between 1 and {MAX_DEVICES}, got {num_devices}")
  backend = named.get("backend", environ.get(BACKEND_ENV)) or "auto"
  if not isinstance(backend, str) or backend not in BACKENDS:
    raise support.InvalidArgumentError(
        f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
  return ClientOptions(num_devices=num_devices, backend=backend)


# --------------------------------------------------------------------------
# CompileOptionsProto.

_CO_PARAMETER_IS_TUPLED_ARGUMENTS = 2
_CO_EXECUTABLE_BUILD_OPTIONS = 3
_CO_COMPILE_PORTABLE_EXECUTABLE = 4
_EBO_DEVICE_ORDINAL = 1
_EBO_NUM_REPLICAS = 4
_EBO_NUM_PARTITIONS = 5
_EBO_USE_SPMD_PARTITIONING = 6
_EBO_USE_AUTO_SPMD_PARTITIONING = 7
_EBO_DEVICE_ASSIGNMENT = 9
_VARINT, _LEN = 0, 2


@dataclasses.dataclass(frozen=True)
class CompileOptions:
  """The fields of a CompileOptionsProto the plugin acts on."""

  num_replicas: int = 1
  num_partitions: int = 1
  device_ordinal: int = -1
  device_assignment: tuple[tuple[int, ...], ...] | None = None
  use_spmd_partitioning: bool = False
  use_auto_spmd_partitioning: bool = False
  compile_portable_executable: bool = False
  parameter_is_tupled_arguments: bool = False


def _signed(value: int) -> int:
  return value - (1 << 64) if value >= 1 << 63 else value


def decode_compile_options(data: bytes) -> CompileOptions:
  """Decodes a serialized CompileOptionsProto.

  An absent ExecutableBuildOptionsProto means one replica and one partition;
  a present one is taken as written (proto3: an unset count reads 0, which
  `check` then rejects).

  Raises:
    support.InvalidArgumentError: malformed bytes.
  """
  fields: dict[str, Any] = {}
  try:
    build = None
    for field, wire, value in co.iter_fields(bytes(data)):
      if field == _CO_PARAMETER_IS_TUPLED_ARGUMENTS and wire == _VARINT:
        fields["parameter_is_tupled_arguments"] = bool(value)
      elif field == _CO_COMPILE_PORTABLE_EXECUTABLE and wire == _VARINT:
        fields["compile_portable_executable"] = bool(value)
      elif field == _CO_EXECUTABLE_BUILD_OPTIONS and wire == _LEN:
        build = value
    if build is not None:
      fields["num_replicas"] = 0
      fields["num_partitions"] = 0
      fields["device_ordinal"] = 0
      for field, wire, value in co.iter_fields(build):
        if wire == _VARINT and field == _EBO_DEVICE_ORDINAL:
          fields["device_ordinal"] = _signed(value)
        elif wire == _VARINT and field == _EBO_NUM_REPLICAS:
          fields["num_replicas"] = _signed(value)
        elif wire == _VARINT and field == _EBO_NUM_PARTITIONS:
          fields["num_partitions"] = _signed(value)
        elif wire == _VARINT and field == _EBO_USE_SPMD_PARTITIONING:
          fields["use_spmd_partitioning"] = bool(value)
        elif wire == _VARINT and field == _EBO_USE_AUTO_SPMD_PARTITIONING:
          fields["use_auto_spmd_partitioning"] = bool(value)
        elif wire == _LEN and field == _EBO_DEVICE_ASSIGNMENT:
          assignment = co.decode_device_assignment(value)
          fields["device_assignment"] = tuple(tuple(r) for r in assignment)
  except support.XlaError as e:
    raise support.InvalidArgumentError(
        f"compile options are not a valid serialized CompileOptionsProto: "
        f"{e}") from None
  return CompileOptions(**fields)
