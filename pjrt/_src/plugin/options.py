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
  topology_timeout_s       OPENXLA_CPU_TOPOLOGY_TIMEOUT_S
                           seconds a process of a multi-process client
                           waits for each other process's devices (default
                           300, as jax.distributed's initialization)
  cross_process_timeout_s  OPENXLA_CPU_CROSS_PROCESS_TIMEOUT_S
                           seconds a collective between processes waits for
                           the other processes (default 600)
  intra_op_parallelism_threads  OPENXLA_CPU_INTRA_OP_PARALLELISM_THREADS
                           threads one execution of the cpu backend splits
                           its kernels across, the caller's included
                           (XLA's LocalClientOptions field of that name;
                           0 or -1: one per core, the default). A process
                           that runs other parallel work beside the
                           plugin's programs (a framework's own eager ops)
                           sets it so that the two do not oversubscribe
                           the cores. It applies to programs compiled, or
                           deserialized, through the client.

The distributed runtime (`jax.distributed.initialize`) adds `node_id` (this
process's index) and `num_nodes` (how many processes), and `partition_index`
on multi-slice setups (ignored: a CPU client has one slice); with
num_nodes > 1 the client exchanges its topology with the others
(multiprocess.py).

Values may be given as strings ("4"), as JAX's
`jax_pjrt_client_create_options` passes them. Unknown options are an error
(a typo should not be ignored).

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
TOPOLOGY_TIMEOUT_ENV = "OPENXLA_CPU_TOPOLOGY_TIMEOUT_S"
CROSS_PROCESS_TIMEOUT_ENV = "OPENXLA_CPU_CROSS_PROCESS_TIMEOUT_S"
INTRA_OP_THREADS_ENV = "OPENXLA_CPU_INTRA_OP_PARALLELISM_THREADS"
DEFAULT_NUM_DEVICES = 1
MAX_DEVICES = 256
# Processes of one client: device ids are process * 131072 + local index
# (multiprocess.py), so this keeps every id a positive C int.
MAX_PROCESSES = 16384
DEFAULT_TOPOLOGY_TIMEOUT_S = 300.0
DEFAULT_CROSS_PROCESS_TIMEOUT_S = 600.0
# More worker threads than this is a mistake, not a machine.
MAX_INTRA_OP_THREADS = 4096
BACKENDS = ("auto", "cpu", "evaluator", "interpreter")
_KNOWN = ("backend", "cross_process_timeout_s", "intra_op_parallelism_threads",
          "node_id", "num_devices", "num_nodes", "partition_index",
          "topology_timeout_s")


@dataclasses.dataclass(frozen=True)
class ClientOptions:
  num_devices: int = DEFAULT_NUM_DEVICES
  backend: str = "auto"
  # This process's index among num_nodes processes of one client.
  node_id: int = 0
  num_nodes: int = 1
  topology_timeout_s: float = DEFAULT_TOPOLOGY_TIMEOUT_S
  cross_process_timeout_s: float = DEFAULT_CROSS_PROCESS_TIMEOUT_S
  # Threads per execution of the cpu backend; 0: one per core.
  intra_op_parallelism_threads: int = 0


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


def _seconds(name: str, value: Any, default: float) -> float:
  if value in (None, ""):
    return default
  if not isinstance(value, bool) and isinstance(value, (int, float, str)):
    try:
      seconds = float(value)
    except ValueError:
      seconds = -1.0
    if 0 < seconds < float("inf"):
      return seconds
  raise support.InvalidArgumentError(
      f"{name} must be a positive number of seconds, got {value!r}")


def client_options(named: dict[str, Any],
                   environ: dict[str, str] | None = None) -> ClientOptions:
  """Resolves create options > environment > defaults.

  Raises:
    support.InvalidArgumentError: an unknown option or a bad value.
  """
  environ = os.environ if environ is None else environ
  named = dict(named)
  unknown = sorted(set(named) - set(_KNOWN))
  if unknown:
    raise support.InvalidArgumentError(
        f"unknown create option(s) {', '.join(unknown)} (known: "
        f"{', '.join(_KNOWN)})")
  num_nodes = _as_int("num_nodes", named.get("num_nodes", 1))
  node_id = _as_int("node_id", named.get("node_id", 0))
  if not 1 <= num_nodes <= MAX_PROCESSES:
    raise support.InvalidArgumentError(
        f"num_nodes must be between 1 and {MAX_PROCESSES}, got {num_nodes}")
  if not 0 <= node_id < num_nodes:
    raise support.InvalidArgumentError(
        f"node_id must be between 0 and num_nodes - 1 = {num_nodes - 1}, "
        f"got {node_id}")
  if "partition_index" in named:
    _as_int("partition_index", named["partition_index"])
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
  topology_timeout_s = _seconds(
      "topology_timeout_s",
      named.get("topology_timeout_s", environ.get(TOPOLOGY_TIMEOUT_ENV)),
      DEFAULT_TOPOLOGY_TIMEOUT_S)
  cross_process_timeout_s = _seconds(
      "cross_process_timeout_s",
      named.get("cross_process_timeout_s",
                environ.get(CROSS_PROCESS_TIMEOUT_ENV)),
      DEFAULT_CROSS_PROCESS_TIMEOUT_S)
  raw = named.get("intra_op_parallelism_threads",
                  environ.get(INTRA_OP_THREADS_ENV))
  threads = (0 if raw in (None, "") else
             _as_int("intra_op_parallelism_threads", raw))
  if not -1 <= threads <= MAX_INTRA_OP_THREADS:
    raise support.InvalidArgumentError(
        f"intra_op_parallelism_threads must be between 1 and "
        f"{MAX_INTRA_OP_THREADS}, or 0 or -1 for one per core; got {threads}")
  return ClientOptions(num_devices=num_devices, backend=backend,
                       node_id=node_id, num_nodes=num_nodes,
                       topology_timeout_s=topology_timeout_s,
                       cross_process_timeout_s=cross_process_timeout_s,
                       intra_op_parallelism_threads=max(0, threads))


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
_EBO_PROPAGATION_TO_OUTPUT = 12
_EBO_PROPAGATION_TO_PARAMETERS = 18
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
  # allow_spmd_sharding_propagation_to_parameters / _to_output: per
  # parameter / output (one value: all), whether one without a sharding
  # takes what sharding propagation finds rather than being replicated.
  propagation_to_parameters: tuple[bool, ...] = ()
  propagation_to_output: tuple[bool, ...] = ()
  # env_option_overrides (JAX's `compiler_options`): (name, value) pairs,
  # each naming a DebugOptions field, here one of our flags
  # (backends.check_option_overrides).
  option_overrides: tuple[tuple[str, Any], ...] = ()


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
        elif field in (_EBO_PROPAGATION_TO_OUTPUT,
                       _EBO_PROPAGATION_TO_PARAMETERS):
          key = ("propagation_to_output" if field == _EBO_PROPAGATION_TO_OUTPUT
                 else "propagation_to_parameters")
          fields[key] = fields.get(key, ()) + tuple(
              co.repeated_bools(wire, value))
    overrides = co.decode_env_option_overrides(bytes(data))
    if overrides:
      fields["option_overrides"] = tuple(overrides)
  except support.XlaError as e:
    raise support.InvalidArgumentError(
        f"compile options are not a valid serialized CompileOptionsProto: "
        f"{e}") from None
  return CompileOptions(**fields)
