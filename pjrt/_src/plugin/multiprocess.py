"""Clients of several processes: the topology exchange.

`jax.distributed.initialize()` makes JAX create the plugin's client with
create options `node_id` (this process) and `num_nodes` (how many), and
hands PJRT_Client_Create the distributed runtime's key-value store as three
callbacks (`kv_get`, `kv_try_get`, `kv_put`). jaxlib trusts the topology the
plugin reports (it does not exchange one itself), so with num_nodes > 1 each
process's client:

  1. puts the description of its own devices under its key
     (`topology/<generation>/<node_id>`: JSON of `ProcessInfo`);
  2. gets every other process's description, each a blocking get with the
     `topology_timeout_s` create option as its timeout (a process that
     never comes is DEADLINE_EXCEEDED, naming it);
  3. lists every process's devices: process p's local device i has the
     global id p * 131072 + i (as XLA's CPU client numbers them), its
     `process_index` is p, and only the process's own devices are
     addressable.

The generation is the first whose key of this process is free: the store
refuses to overwrite a key, so a process's second client (JAX may recreate
its backends) takes the next, as the other processes' second clients do.

Each description also carries the process's rank in an MPI job when an MPI
launcher started it (`launcher_rank`: read from the launcher's environment,
without initializing MPI), which the CPU backend's cross-process
collectives use to address the process.
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import json
import os
import threading
import time
from typing import Any, Optional, Protocol

import support
from pjrt._src import abi
from pjrt._src.plugin import errors
from pjrt._src.plugin import native

# Device ids of process p start at p * DEVICE_ID_STRIDE (XLA's CPU client).
DEVICE_ID_STRIDE = 1 << 17
KEY_PREFIX = "topology"
_FORMAT = 1
# Environment variables in which MPI launchers give a process its rank:
# Open MPI's mpirun, PMIx launchers (srun --mpi=pmix, prterun), and PMI-1/2
# launchers (MPICH's Hydra, srun --mpi=pmi2).
RANK_ENVS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")


def global_device_id(process_index: int, local_index: int) -> int:
  return process_index * DEVICE_ID_STRIDE + local_index


def launcher_rank(environ: Optional[dict[str, str]] = None) -> Optional[int]:
  """This process's rank in the MPI job that started it, or None when no
  MPI launcher started it."""
  environ = os.environ if environ is None else environ
  for name in RANK_ENVS:
    value = environ.get(name, "").strip()
    if value.isdigit():
      return int(value)
  return None


@dataclasses.dataclass(frozen=True)
class ProcessInfo:
  """What a process tells the others about itself."""

  process_index: int
  num_devices: int
  backend: str
  mpi_rank: Optional[int] = None

  def encode(self) -> bytes:
    fields = dataclasses.asdict(self)
    fields["format"] = _FORMAT
    return json.dumps(fields, sort_keys=True).encode("utf-8")

  @classmethod
  def decode(cls, data: bytes, what: str) -> "ProcessInfo":
    try:
      fields = json.loads(bytes(data).decode("utf-8"))
      if fields.pop("format") != _FORMAT:
        raise ValueError(f"format {fields.get('format')}")
      info = cls(**fields)
      if not (isinstance(info.process_index, int) and
              isinstance(info.num_devices, int) and info.num_devices >= 1 and
              isinstance(info.backend, str) and
              (info.mpi_rank is None or isinstance(info.mpi_rank, int))):
        raise ValueError(f"bad fields {fields}")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
      raise support.DataLossError(
          f"{what} is not a topology description of the openxla_cpu plugin "
          f"({e})") from None
    return info


class KeyValueStore(Protocol):
  """The distributed runtime's key-value store."""

  def get(self, key: str, timeout_s: float) -> bytes:
    """The value of `key`, waiting up to `timeout_s` for it to be put
    (DEADLINE_EXCEEDED, or the store's own error, when it is not)."""

  def put(self, key: str, value: bytes) -> None:
    ...


def exchange_topology(store: KeyValueStore, own: ProcessInfo,
                      num_processes: int,
                      timeout_s: float) -> list[ProcessInfo]:
  """Every process's description, in process order (`own` included).

  Raises:
    support.DeadlineExceededError: a process did not put its description
      within `timeout_s`.
    support.DataLossError: a description that is not ours.
    support.FailedPreconditionError: processes that disagree (another
      backend, a process index that is not its key's).
  """
  for generation in itertools.count():
    prefix = f"{KEY_PREFIX}/{generation}/"
    try:
      store.put(prefix + str(own.process_index), own.encode())
      break
    except support.AlreadyExistsError:
      continue  # An earlier client of this process's.
  infos = []
  deadline = time.monotonic() + timeout_s
  for p in range(num_processes):
    if p == own.process_index:
      infos.append(own)
      continue
    key = prefix + str(p)
    left = max(0.001, deadline - time.monotonic())
    try:
      data = store.get(key, left)
    except (support.DeadlineExceededError, support.NotFoundError) as e:
      raise support.DeadlineExceededError(
          f"topology exchange: process {own.process_index} waited "
          f"{timeout_s:.3g} s for the devices of process {p} of "
          f"{num_processes} (key {key!r}): is process {p} running, and did "
          f"it create its openxla_cpu client? ({e})") from None
    info = ProcessInfo.decode(data, f"the value of {key!r}")
    if info.process_index != p:
      raise support.FailedPreconditionError(
          f"topology exchange: the description under {key!r} is of process "
          f"{info.process_index}")
    infos.append(info)
  backends = sorted({i.backend for i in infos})
  if len(backends) > 1:
    raise support.FailedPreconditionError(
        "topology exchange: the processes run different backends (" +
        ", ".join(f"process {i.process_index}: {i.backend}"
                  for i in infos) +
        "); give every process the same backend option")
  return infos


# --------------------------------------------------------------------------
# The store behind PJRT_Client_Create's callbacks.

_KV_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_VALUE_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# PJRT_Error* PJRT_CallbackError(PJRT_Error_Code, const char*, size_t): the
# callbacks report their failures as errors of ours.
_CALLBACK_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int,
                                   ctypes.c_void_p, ctypes.c_size_t)


def _callback_error(code, message, size):
  try:
    text = ctypes.string_at(message, size).decode(
        "utf-8", errors="replace") if size and message else ""
    return errors.new_error(int(code), text)
  except BaseException:  # pylint: disable=broad-except
    return errors.FALLBACK or 0


native.register("multiprocess.callback_error",
                _CALLBACK_ERROR(_callback_error), "ipp>p",
                native.Refusal(result="error"))
# PJRT_CallbackError* fields point at a word that holds the function.
_CALLBACK_ERROR_WORD = (ctypes.c_void_p * 1)()
_word_lock = threading.Lock()


def _callback_error_pointer() -> int:
  with _word_lock:
    if not _CALLBACK_ERROR_WORD[0]:
      _CALLBACK_ERROR_WORD[0] = native.address("multiprocess.callback_error")
  return ctypes.addressof(_CALLBACK_ERROR_WORD)


def _raise_callback_error(address: int, what: str) -> None:
  """Raises the error a callback returned (our own PJRT_Error)."""
  try:
    record = errors.get(address)
    code, message = record.code, record.message
  except support.XlaError:
    raise support.InternalError(
        f"{what}: the key-value store callback returned an error that the "
        "openxla_cpu plugin did not make") from None
  errors.destroy(address)
  try:
    error = support.error_for_code(code, f"{what}: {message}")
  except ValueError:  # OK or an unknown code
    error = support.UnknownError(f"{what}: {message} (code {code})")
  raise error


class CallbackStore:
  """The key-value store of PJRT_Client_Create's callbacks."""

  def __init__(self, get_fn: int, get_arg: int, put_fn: int, put_arg: int):
    if not get_fn or not put_fn:
      raise support.InvalidArgumentError(
          "a client of several processes needs the key-value store "
          "callbacks kv_get_callback and kv_put_callback "
          "(jax.distributed.initialize() provides them)")
    self._get = _KV_CALLBACK(get_fn)
    self._get_arg = get_arg
    self._put = _KV_CALLBACK(put_fn)
    self._put_arg = put_arg

  def get(self, key: str, timeout_s: float) -> bytes:
    key_bytes = key.encode("utf-8")
    key_c = ctypes.create_string_buffer(key_bytes, len(key_bytes) + 1)
    args = abi.make_args(abi.args_type("KeyValueGetCallback"),
                         key=ctypes.addressof(key_c), key_size=len(key_bytes),
                         timeout_in_ms=max(1, min(int(timeout_s * 1000),
                                                  2 ** 31 - 1)),
                         callback_error=_callback_error_pointer(),
                         user_arg=self._get_arg)
    error = self._get(ctypes.addressof(args))
    if error:
      _raise_callback_error(error, f"key-value get of {key!r}")
    value = args.value
    data = ctypes.string_at(value, args.value_size) if args.value_size else b""
    if value and args.value_deleter_callback:
      _VALUE_DELETER(args.value_deleter_callback)(value)
    return data

  def put(self, key: str, value: bytes) -> None:
    key_bytes = key.encode("utf-8")
    key_c = ctypes.create_string_buffer(key_bytes, len(key_bytes) + 1)
    value_c = ctypes.create_string_buffer(bytes(value), len(value) + 1)
    args = abi.make_args(abi.args_type("KeyValuePutCallback"),
                         key=ctypes.addressof(key_c), key_size=len(key_bytes),
                         value=ctypes.addressof(value_c),
                         value_size=len(value),
                         callback_error=_callback_error_pointer(),
                         user_arg=self._put_arg)
    error = self._put(ctypes.addressof(args))
    if error:
      _raise_callback_error(error, f"key-value put of {key!r}")


class MemoryStore:
  """A key-value store in this process's memory (thread-safe; for tests
  and for simulating several processes in one)."""

  def __init__(self):
    self._values: dict[str, bytes] = {}
    self._cond = threading.Condition()

  def put(self, key: str, value: bytes) -> None:
    with self._cond:
      if key in self._values:
        raise support.AlreadyExistsError(f"key {key!r} exists")
      self._values[key] = bytes(value)
      self._cond.notify_all()

  def get(self, key: str, timeout_s: float) -> bytes:
    deadline = time.monotonic() + timeout_s
    with self._cond:
      while key not in self._values:
        left = deadline - time.monotonic()
        if left <= 0:
          raise support.DeadlineExceededError(
              f"key {key!r} was not put within {timeout_s:.3g} s")
        self._cond.wait(left)
      return self._values[key]

  def keys(self) -> list[str]:
    with self._cond:
      return sorted(self._values)


def store_from_args(args: Any) -> Optional[CallbackStore]:
  """The store of PJRT_Client_Create_Args, or None without callbacks."""
  if not args.kv_get_callback and not args.kv_put_callback:
    return None
  return CallbackStore(args.kv_get_callback, args.kv_get_user_arg,
                       args.kv_put_callback, args.kv_put_user_arg)

