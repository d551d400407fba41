"""The plugin's object model: client, virtual CPU devices, memories, buffers.

Everything here is plain Python; the C API layer (slots_*.py) only converts
arguments and handles. A client owns `num_devices` virtual CPU devices, each
with three memories ("device", the default, "pinned_host" and
"unpinned_host"; all are host memory, so they differ only in name) and one
worker thread (started on first use) that runs the device's work in order.

A buffer's data is a C-contiguous numpy array of its element type (one byte
per element for the sub-byte types, as numpy and ml_dtypes store them); a
TOKEN buffer's is a scalar of zero bytes (dtypes.TOKEN_STORAGE). A
buffer made by an execution starts pending: its future completes when the
execution has produced the data, or with the execution's error.

A client of several processes (create options node_id / num_nodes, see
multiprocess.py) lists every process's devices: its own are addressable
(`Device`), the others' are `RemoteDevice`s, which have an id, a process
index and a description, and no memories, worker or buffers.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import queue
import threading
from typing import Any, Callable, Optional

import numpy as np

import support
from pjrt._src import abi_types
from pjrt._src import dtypes
from pjrt._src.plugin import events
from pjrt._src.plugin import handles
from pjrt._src.plugin import multiprocess
from pjrt._src.plugin import native_slots
from pjrt._src.plugin import options as options_lib

PLATFORM_NAME = "openxla_cpu"
DEVICE_KIND = "OpenXLA virtual CPU"
MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")
DEFAULT_MEMORY_KIND = "device"

CLIENT = "PJRT_Client"
DEVICE = "PJRT_Device"
DESCRIPTION = "PJRT_DeviceDescription"
MEMORY = "PJRT_Memory"
BUFFER = "PJRT_Buffer"


class CStrings:
  """C copies of strings and arrays an object hands out, kept alive with it.

  `get(key, make)` returns the cached ctypes object for `key`, building it
  once with `make()`; the C API says such outputs live as long as their
  owner, and the cache makes repeated calls return the same pointer.
  """

  def __init__(self):
    self._cache: dict[Any, Any] = {}
    self._lock = threading.Lock()

  def get(self, key: Any, make: Callable[[], Any]) -> Any:
    with self._lock:
      value = self._cache.get(key)
      if value is None:
        value = self._cache[key] = make()
      return value

  def string(self, key: Any, text: str | bytes) -> tuple[int, int]:
    """(address, size) of a NUL-terminated C copy of `text`."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    buf = self.get(("str", key, data),
                   lambda: ctypes.create_string_buffer(data, len(data) + 1))
    return ctypes.addressof(buf), len(data)

  def handles(self, key: Any, addresses: list[int]) -> tuple[Any, int]:
    """(void*[] array, count) holding `addresses`."""
    array = self.get(("handles", key, tuple(addresses)),
                     lambda: (ctypes.c_void_p * max(1, len(addresses)))(
                         *addresses))
    return array, len(addresses)


# --------------------------------------------------------------------------
# Worker threads.


class Worker:
  """One thread running a device's jobs in submission order."""

  def __init__(self, name: str):
    self._name = name
    self._queue: queue.SimpleQueue = queue.SimpleQueue()
    self._thread: threading.Thread | None = None
    self._lock = threading.Lock()
    self._stopped = False

  def submit(self, job: Callable[[], None]) -> None:
    with self._lock:
      if self._stopped:
        raise support.FailedPreconditionError(
            f"{self._name}: the client was destroyed")
      if self._thread is None:
        self._thread = threading.Thread(target=self._run, name=self._name,
                                        daemon=True)
        self._thread.start()
      self._queue.put(job)

  def _run(self) -> None:
    while True:
      job = self._queue.get()
      if job is None:
        return
      try:
        job()
      except BaseException:  # pylint: disable=broad-except
        pass  # Jobs report their own errors through futures.

  def is_current_thread(self) -> bool:
    """Whether the calling thread is this worker's (a job running on it,
    e.g. a host callback, is making the call)."""
    return self._thread is threading.current_thread()

  def stop(self) -> None:
    """Stops after the queued jobs (does not wait for them)."""
    with self._lock:
      if self._stopped:
        return
      self._stopped = True
      if self._thread is not None:
        self._queue.put(None)


# --------------------------------------------------------------------------
# Devices and memories.


# fn(stats address, bytes, allocations): the native, atomic counter update
# of Device.stats (native_execute.py installs it; None: Python counts).
ACCOUNT: list = [None]


class DeviceDescription:
  """What PJRT_DeviceDescription_* report about one device."""

  def __init__(self, device_id: int, process_index: int = 0):
    self.id = device_id
    self.process_index = process_index
    self.kind = DEVICE_KIND
    self.debug_string = (
        f"OpenXlaCpuDevice(id={device_id})" if not process_index else
        f"OpenXlaCpuDevice(id={device_id}, process_index={process_index})")
    self.to_string = f"OPENXLA_CPU_{device_id}"
    self.attributes: dict[str, Any] = {"device_index": device_id}
    self.c = CStrings()
    self.handle = 0


class Memory:
  """A memory space of one device."""

  def __init__(self, memory_id: int, kind: str, device: "Device"):
    self.id = memory_id
    self.kind = kind
    self.kind_id = MEMORY_KINDS.index(kind)
    self.device = device
    self.debug_string = (f"OpenXlaCpuMemory(id={memory_id}, kind={kind}, "
                         f"device={device.id})")
    self.to_string = f"{kind.upper()}_{memory_id}"
    self.c = CStrings()
    self.kind_c: tuple[int, int] | None = None  # See slots_client.
    self.handle = 0


class Device:
  """A virtual CPU device of this process (addressable)."""

  addressable = True

  def __init__(self, client: "Client", index: int, process_index: int = 0):
    self.client = client
    self.id = multiprocess.global_device_id(process_index, index)
    self.local_hardware_id = index
    self.process_index = process_index
    self.description = DeviceDescription(self.id, process_index)
    self.memories = [Memory(len(MEMORY_KINDS) * self.id + i, kind, self)
                     for i, kind in enumerate(MEMORY_KINDS)]
    self.default_memory = self.memories[0]
    self.worker = Worker(f"openxla_cpu-device-{index}")
    self.c = CStrings()
    self.handle = 0
    self._stats_lock = threading.Lock()
    # bytes in use, peak bytes in use, allocations: native code (the native
    # Execute and transfer) counts its buffers here too, atomically, and
    # Python does through the same function where it is built
    # (`ACCOUNT`, set by native_execute.py).
    self.stats = handles.immortal((ctypes.c_int64 * 4)())
    # Executions enqueued and not finished: [(launch_id, job)].
    self._pending: list[tuple[int, Any]] = []

  # -- Memory statistics. -----------------------------------------------------

  def account(self, nbytes: int, allocation: bool) -> None:
    native_account = ACCOUNT[0]
    if native_account is not None:
      native_account(ctypes.addressof(self.stats), nbytes, int(allocation))
      return
    stats = self.stats
    with self._stats_lock:
      stats[0] += nbytes
      stats[1] = max(stats[1], stats[0])
      stats[2] += int(allocation)

  def memory_stats(self) -> dict[str, int]:
    stats = self.stats
    return {"bytes_in_use": stats[0], "peak_bytes_in_use": stats[1],
            "num_allocs": stats[2]}

  def clear_memory_stats(self) -> None:
    with self._stats_lock:
      self.stats[1] = self.stats[0]
      self.stats[2] = 0

  # -- Pending executions (for PJRT_Device_PoisonExecution). ------------------

  def add_pending(self, launch_id: int, job: Any) -> None:
    with self._stats_lock:
      self._pending.append((launch_id, job))

  def is_idle(self) -> bool:
    """Whether no execution is queued or running on this device."""
    return not self._pending

  def remove_pending(self, job: Any) -> None:
    with self._stats_lock:
      pending = self._pending
      if len(pending) == 1 and pending[0][1] is job:
        self._pending = []
      else:
        self._pending = [(i, j) for i, j in pending if j is not job]

  def poison(self, launch_id: int, status: tuple[int, str]) -> bool:
    """Fails the earliest unfinished execution with `launch_id`."""
    with self._stats_lock:
      for pending_id, job in self._pending:
        if pending_id == launch_id and job.poison(status):
          return True
    return False

  def __repr__(self) -> str:
    return f"<Device {self.id}>"


class RemoteDevice(Device):
  """A device of another process of a multi-process client."""

  addressable = False

  def __init__(self, client: "Client", index: int,
               process_index: int):  # pylint: disable=super-init-not-called
    self.client = client
    self.id = multiprocess.global_device_id(process_index, index)
    self.local_hardware_id = index
    self.process_index = process_index
    self.description = DeviceDescription(self.id, process_index)
    self.memories = []
    self.worker = None
    self.c = CStrings()
    self.handle = 0
    self.stats = None

  def _not_addressable(self) -> support.XlaError:
    return support.InvalidArgumentError(
        f"device {self.id} belongs to process {self.process_index}; it is "
        f"not addressable from process {self.client.process_index}")

  @property
  def default_memory(self) -> Memory:
    raise self._not_addressable()

  def memory_stats(self) -> dict[str, int]:
    raise self._not_addressable()

  def clear_memory_stats(self) -> None:
    raise self._not_addressable()

  def is_idle(self) -> bool:
    return True

  def poison(self, launch_id: int, status: tuple[int, str]) -> bool:
    return False

  def __repr__(self) -> str:
    return f"<RemoteDevice {self.id} of process {self.process_index}>"


# --------------------------------------------------------------------------
# Client.

_client_ids = itertools.count()


class Client:
  """A PJRT_Client: devices, memories, and the backend that runs programs."""

  def __init__(self, opts: options_lib.ClientOptions,
               store: Optional[multiprocess.KeyValueStore] = None):
    self.options = opts
    self.serial = next(_client_ids)
    from pjrt._src.plugin import backends  # pylint: disable=g-import-not-at-top
    self.backend = backends.resolve(opts.backend)
    self.process_index = opts.node_id
    own = multiprocess.ProcessInfo(opts.node_id, opts.num_devices,
                                   self.backend,
                                   multiprocess.launcher_rank())
    if opts.num_nodes > 1:
      if store is None:
        raise support.InvalidArgumentError(
            f"a client of {opts.num_nodes} processes needs the key-value "
            "store callbacks kv_get_callback and kv_put_callback "
            "(jax.distributed.initialize() provides them)")
      self.processes = multiprocess.exchange_topology(
          store, own, opts.num_nodes, opts.topology_timeout_s)
    else:
      self.processes = [own]
    # This process's devices, then every device in process order.
    self.addressable_devices = [Device(self, i, self.process_index)
                                for i in range(opts.num_devices)]
    if len(self.processes) == 1:
      self.devices = self.addressable_devices
    else:
      self.devices = []
      for info in self.processes:
        if info.process_index == self.process_index:
          self.devices.extend(self.addressable_devices)
        else:
          self.devices.extend(RemoteDevice(self, i, info.process_index)
                              for i in range(info.num_devices))
    self._by_id = {d.id: d for d in self.devices}
    self.memories = [m for d in self.addressable_devices for m in d.memories]
    self.destroyed = False
    # Execute calls enqueue the jobs of all their devices under this lock,
    # so every device sees multi-device launches in one global order.
    self.launch_lock = threading.Lock()
    self.c = CStrings()
    self.handle = 0
    # Under "auto", programs the chosen backend cannot compile fall back to
    # the interpreter.
    self.backend_fallback = opts.backend == "auto"
    self.platform_version = (
        f"openxla-pjrt CPU plugin; backend {self.backend}; "
        f"{opts.num_devices} virtual devices")
    if len(self.processes) > 1:
      self.platform_version += (
          f" in process {self.process_index} of {len(self.processes)}")

  @property
  def num_processes(self) -> int:
    return len(self.processes)

  @property
  def device_ids(self) -> dict[int, "Device"]:
    """Every device (of every process) by id."""
    return self._by_id

  def register_handles(self) -> None:
    """Gives the client, its devices, descriptions and memories handles."""
    self.handle = handles.TABLE.add(CLIENT, self)
    for device in self.devices:
      device.handle = handles.TABLE.add(DEVICE, device)
      device.description.handle = handles.TABLE.add(DESCRIPTION,
                                                    device.description)
      if not device.addressable:
        # No default memory: the native BufferFromHostBuffer leaves such a
        # device to Python, which refuses it.
        handles.TABLE.update(device.handle, device, native_slots.word(
            native_slots.DEVICE_WORDS, "client"), self.handle)
        continue
      for memory in device.memories:
        memory.handle = handles.TABLE.add(MEMORY, memory)
      # The device's record names its client and default memory, for the
      # native BufferFromHostBuffer (native_slots.DEVICE_WORDS).
      for name, value in (("client", self.handle),
                          ("default_memory", device.default_memory.handle),
                          ("stats", ctypes.addressof(device.stats))):
        handles.TABLE.update(device.handle, device,
                             native_slots.word(native_slots.DEVICE_WORDS,
                                               name), value)

  def destroy(self) -> None:
    """Stops the workers and releases every handle the client owns."""
    self.destroyed = True
    for device in self.devices:
      if device.worker is not None:
        device.worker.stop()
      for memory in device.memories:
        handles.TABLE.remove(memory.handle, MEMORY)
      handles.TABLE.remove(device.description.handle, DESCRIPTION)
      handles.TABLE.remove(device.handle, DEVICE)
    handles.TABLE.remove(self.handle, CLIENT)

  def check_alive(self) -> None:
    if self.destroyed:
      raise support.FailedPreconditionError("the PJRT_Client was destroyed")

  def lookup_device(self, device_id: int) -> Device:
    device = self._by_id.get(device_id)
    if device is not None:
      return device
    raise support.InvalidArgumentError(
        f"no device with id {device_id} (ids are "
        f"{describe_ids(self._by_id)})")

  def lookup_addressable_device(self, local_hardware_id: int) -> Device:
    local = self.addressable_devices
    if 0 <= local_hardware_id < len(local):
      return local[local_hardware_id]
    raise support.InvalidArgumentError(
        f"no addressable device with local hardware id {local_hardware_id} "
        f"(ids are 0..{len(local) - 1})")

  def default_device_assignment(self, num_replicas: int,
                                num_partitions: int) -> list[list[int]]:
    """Device ids [replica][partition], each device used once: this
    process's devices when they are enough, else every process's in
    process order."""
    if num_replicas < 1 or num_partitions < 1:
      raise support.InvalidArgumentError(
          f"a device assignment needs at least one replica and one "
          f"partition, got {num_replicas} x {num_partitions}")
    needed = num_replicas * num_partitions
    if needed > len(self.devices):
      raise support.InvalidArgumentError(
          f"{num_replicas} replicas x {num_partitions} partitions need "
          f"{needed} devices; the client has {len(self.devices)}")
    pool = (self.addressable_devices
            if needed <= len(self.addressable_devices) else self.devices)
    return [[pool[r * num_partitions + p].id for p in range(num_partitions)]
            for r in range(num_replicas)]


def describe_ids(ids) -> str:
  """"0..3", or the ids of several processes' devices."""
  ordered = sorted(ids)
  if ordered == list(range(len(ordered))):
    return f"0..{len(ordered) - 1}"
  return ", ".join(str(i) for i in ordered)


# --------------------------------------------------------------------------
# Buffers.


class Buffer:
  """A PJRT_Buffer: an array in one memory of one device.

  Attributes:
    future: completes when the data is ready (or failed).
  """

  def __init__(self, client: Client, memory: Memory,
               element_type: abi_types.BufferType, shape: tuple[int, ...],
               future: events.Future, array: np.ndarray | None = None):
    self.client = client
    self.memory = memory
    self.device = memory.device
    self.element_type = abi_types.BufferType(element_type)
    self.dtype = dtypes.storage_dtype(self.element_type)
    self.shape = tuple(int(d) for d in shape)
    # The device layout reported to callers; the data itself is logical.
    self.minor_to_major = tuple(range(len(self.shape) - 1, -1, -1))
    self.nbytes = math.prod(self.shape) * self.dtype.itemsize
    self.init_state(future, array)

  def init_state(self, future: events.Future,
                 array: np.ndarray | None, counted: bool = False) -> None:
    """Sets the state of a new buffer (also for the constructors that
    skip __init__ with a precomputed type). `counted`: its bytes are in
    the device's statistics already."""
    self.future = future
    self._array = array
    self._deleted_flag = False
    self._external_refs = 0
    self._holds = 0
    self._donation_pending = False
    self._lock = threading.Lock()
    self._c: CStrings | None = None
    self.handle = 0
    self._accounted = self.nbytes if future.status is None else 0
    if not counted:
      self.device.account(self._accounted, allocation=True)

  @property
  def c(self) -> CStrings:
    """C copies this buffer hands out (made on first use)."""
    c = self._c
    if c is None:
      with self._lock:
        if self._c is None:
          self._c = CStrings()
        c = self._c
    return c

  # -- Construction. --------------------------------------------------------

  @classmethod
  def from_array(cls, client: Client, memory: Memory,
                 array: np.ndarray) -> "Buffer":
    array = contiguous(array)
    return cls(client, memory, dtypes.buffer_type(array.dtype), array.shape,
               events.Future.ready(), array)

  @classmethod
  def pending(cls, client: Client, memory: Memory,
              element_type: abi_types.BufferType,
              shape: tuple[int, ...]) -> "Buffer":
    return cls(client, memory, element_type, shape, events.Future())

  @classmethod
  def pending_of(cls, client: Client, memory: Memory,
                 spec: "BufferSpec") -> "Buffer":
    """A pending buffer of a precomputed type (the execute fast path)."""
    buffer = cls.__new__(cls)
    buffer.client = client
    buffer.memory = memory
    buffer.device = memory.device
    buffer.element_type = spec.element_type
    buffer.dtype = spec.dtype
    buffer.shape = spec.shape
    buffer.minor_to_major = spec.minor_to_major
    buffer.nbytes = spec.nbytes
    buffer.init_state(events.Future(), None)
    return buffer

  @classmethod
  def ready_of(cls, client: Client, memory: Memory, spec: "BufferSpec",
               array: np.ndarray, counted: bool = False) -> "Buffer":
    """A ready buffer of a precomputed type holding `array` (C-contiguous,
    of the spec's dtype and shape): an inline execution's output.
    `counted`: its bytes are in the device's statistics already (a native
    buffer that Python adopts)."""
    buffer = cls.__new__(cls)
    buffer.client = client
    buffer.memory = memory
    buffer.device = memory.device
    buffer.element_type = spec.element_type
    buffer.dtype = spec.dtype
    buffer.shape = spec.shape
    buffer.minor_to_major = spec.minor_to_major
    buffer.nbytes = spec.nbytes
    buffer.init_state(events.DONE, array, counted)
    return buffer

  def adopt_native(self, accounted: int, external_refs: int) -> None:
    """Takes over the bookkeeping of a buffer that native code made: the
    bytes it counted in the device's statistics, and the references C
    callers hold."""
    self._accounted = accounted
    self._external_refs = external_refs

  def fulfill(self, array: np.ndarray) -> None:
    """Sets the data of a pending buffer and completes its future (a buffer
    deleted meanwhile does not keep the data)."""
    with self._lock:
      if not self._deleted or self._external_refs or self._holds:
        self._array = contiguous(array)
    if self.future.set() and self.handle:
      with self._lock:
        if not self._deleted:
          self._mirror_state(native_slots.BUFFER_READY)

  def fail(self, status: events.Status) -> None:
    self._release_accounting()
    self.future.set(status)

  def _mirror_state(self, state: int) -> None:
    """Updates the state word of this buffer's handle record (and, for a
    ready buffer, its data address first). Leaving BUFFER_READY waits for
    the native executions reading the data (handles.HandleTable.retire)."""
    if not self.handle:
      return
    if state == native_slots.BUFFER_READY:
      handles.TABLE.update(self.handle, self, _DATA_WORD,
                           _data_address(self._array))
      handles.TABLE.update(self.handle, self, _STATE_WORD, state)
    else:
      handles.TABLE.retire(self.handle, self, state)

  def mirror(self) -> tuple[int, ...]:
    """Words of this buffer's handle record (native_slots.BUFFER_WORDS)."""
    if self._deleted:
      state = native_slots.BUFFER_DELETED
    elif self.future.is_ready() and self.future.status is None:
      state = native_slots.BUFFER_READY
    else:
      state = native_slots.BUFFER_UNKNOWN
    key, dims = native_slots.shape_info(self.element_type, self.shape)
    return (state, self.device.handle, self.memory.handle,
            int(self.element_type), _data_address(self._array), key, 0,
            native_slots.OWNER_PYTHON, 0, 0, dims, len(self.shape),
            self.nbytes, 0)

  def _release_accounting(self) -> None:
    with self._lock:
      nbytes, self._accounted = self._accounted, 0
    if nbytes:
      self.device.account(-nbytes, allocation=False)

  # -- State. ---------------------------------------------------------------

  @property
  def _deleted(self) -> bool:
    """Deleted or donated: by Python, or by a native execution that this
    buffer was donated to (it marks the handle record only; see
    native_execute.py)."""
    if self._deleted_flag:
      return True
    handle = self.handle
    if handle and handles.TABLE.word(handle, _STATE_WORD) == (
        native_slots.BUFFER_DELETED) and handles.TABLE.names(handle, self):
      self._deleted_flag = True
    return self._deleted_flag

  @property
  def is_deleted(self) -> bool:
    return self._deleted

  def _deleted_error(self) -> support.XlaError:
    return support.InvalidArgumentError(
        f"the buffer {self.element_type.name}{list(self.shape)} was deleted "
        "or donated")

  def check_usable(self) -> None:
    """Raises if the buffer was deleted or its client destroyed."""
    if self._deleted:
      raise self._deleted_error()
    self.client.check_alive()

  def delete(self) -> None:
    """Drops the data (kept while external references or holds exist)."""
    with self._lock:
      self._deleted_flag = True
      self._mirror_state(native_slots.BUFFER_DELETED)
      if self._external_refs == 0 and self._holds == 0:
        self._array = None
    self._release_accounting()

  def acquire_hold(self) -> None:
    """Keeps the data alive for a pending use (an execution, a copy)."""
    with self._lock:
      if self._deleted:
        raise self._deleted_error()
      self._holds += 1

  def release_hold(self) -> None:
    with self._lock:
      self._holds -= 1
      if self._holds == 0 and self._external_refs == 0 and self._deleted:
        self._array = None

  def held_array(self) -> np.ndarray:
    """The data of a held buffer (waits; valid even if deleted since)."""
    self.future.raise_if_error()
    array = self._array
    if array is None:
      raise support.InternalError("held buffer has no data")
    return array

  def donate(self) -> None:
    """Marks the buffer donated to an execution (same as deleted for users).

    Raises:
      support.InvalidArgumentError: deleted already, or shared externally.
    """
    with self._lock:
      if self._deleted:
        raise self._deleted_error()
      if self._external_refs:
        raise support.InvalidArgumentError(
            "a buffer with external references (e.g. a numpy or dlpack "
            "view) cannot be donated")
      self._deleted_flag = True
      # The execution it was donated to still has to read it: a hold keeps
      # the data when the caller deletes or destroys the buffer before that
      # execution runs (JAX does, right after Execute returns).
      self._holds += 1
      self._donation_pending = True
      self._mirror_state(native_slots.BUFFER_DELETED)
    self._release_accounting()

  def data_after_donation(self) -> np.ndarray:
    """The data of a donated buffer, for the execution it was donated to."""
    self.future.raise_if_error()
    with self._lock:
      array, self._array = self._array, None
      self._end_donation()
    if array is None:
      raise support.InternalError("donated buffer has no data")
    return array

  def release_donation(self) -> None:
    """For an execution that ends without reading its donated buffer."""
    with self._lock:
      self._end_donation()
      if self._holds == 0 and self._external_refs == 0:
        self._array = None

  def _end_donation(self) -> None:
    if self._donation_pending:
      self._donation_pending = False
      self._holds -= 1

  def array(self) -> np.ndarray:
    """The data; waits for a pending buffer; raises its error, if any."""
    if self._deleted:
      raise self._deleted_error()
    self.future.raise_if_error()
    array = self._array
    if array is None:
      raise self._deleted_error()
    return array

  # -- External references (zero-copy views held by other frameworks). ----

  @property
  def has_external_references(self) -> bool:
    """Whether a numpy / dlpack view of the data exists (the buffer then
    cannot be donated)."""
    return self._external_refs > 0

  def add_external_reference(self) -> None:
    with self._lock:
      if self._deleted:
        raise self._deleted_error()
      self._external_refs += 1

  def drop_external_reference(self) -> None:
    with self._lock:
      if self._external_refs == 0:
        raise support.FailedPreconditionError(
            "the buffer has no external references to drop")
      self._external_refs -= 1
      if self._external_refs == 0 and self._holds == 0 and self._deleted:
        self._array = None

  def data_pointer(self) -> int:
    """Address of the data (waits until ready)."""
    array = self.array()
    return array.ctypes.data if array.size else 0

  def __repr__(self) -> str:
    return (f"<Buffer {self.element_type.name}{list(self.shape)} on device "
            f"{self.device.id}>")


class BufferSpec:
  """The type of a buffer, derived once (e.g. per executable result)."""

  __slots__ = ("element_type", "dtype", "shape", "minor_to_major", "nbytes")

  def __init__(self, element_type: abi_types.BufferType,
               shape: tuple[int, ...]):
    self.element_type = abi_types.BufferType(element_type)
    self.dtype = dtypes.storage_dtype(self.element_type)
    self.shape = tuple(int(d) for d in shape)
    self.minor_to_major = tuple(range(len(self.shape) - 1, -1, -1))
    self.nbytes = math.prod(self.shape) * self.dtype.itemsize


_STATE_WORD = native_slots.word(native_slots.BUFFER_WORDS, "state")
_DATA_WORD = native_slots.word(native_slots.BUFFER_WORDS, "data")


def _data_address(array: np.ndarray | None) -> int:
  return 0 if array is None else array.__array_interface__["data"][0]


def _memory_mirror(memory: Memory) -> tuple[int, ...]:
  """Words of a memory's handle record (native_slots.MEMORY_WORDS)."""
  if memory.kind_c is None:  # (address, size), made once.
    memory.kind_c = memory.c.string("kind", memory.kind)
  return memory.kind_c + (memory.device.handle,)


handles.register_mirror(BUFFER, Buffer.mirror)
handles.register_mirror(MEMORY, _memory_mirror)


def register_buffer(buffer: Buffer) -> int:
  buffer.handle = handles.TABLE.add(BUFFER, buffer)
  return buffer.handle


# --------------------------------------------------------------------------
# Host memory views.


def strided_view(address: int, dtype: np.dtype, shape: tuple[int, ...],
                 byte_strides: Optional[tuple[int, ...]],
                 owner: Any = None) -> np.ndarray:
  """A numpy view of host memory at `address` (dense when no strides).

  Strides may be negative: `address` then points inside the data, as the
  C API allows. `owner`, if given, lives as long as the view's memory
  object does.
  """
  shape = tuple(int(d) for d in shape)
  if any(d < 0 for d in shape):
    raise support.InvalidArgumentError(f"negative dimension in {list(shape)}")
  itemsize = dtype.itemsize
  if byte_strides is None:
    strides = []
    step = itemsize
    for d in reversed(shape):
      strides.append(step)
      step *= d
    byte_strides = tuple(reversed(strides))
  elif len(byte_strides) != len(shape):
    raise support.InvalidArgumentError(
        f"{len(byte_strides)} byte strides for a rank-{len(shape)} array")
  if any(d == 0 for d in shape):
    return np.zeros(shape, dtype)
  if not address:
    raise support.InvalidArgumentError("host data pointer is NULL")
  low = sum(min(0, s * (d - 1)) for s, d in zip(byte_strides, shape))
  high = sum(max(0, s * (d - 1)) for s, d in zip(byte_strides, shape))
  span = high - low + itemsize
  raw = (ctypes.c_char * span).from_address(address + low)
  raw.owner = owner
  return np.ndarray(shape, dtype, buffer=raw, offset=-low,
                    strides=byte_strides)


def contiguous(array) -> np.ndarray:
  """`array` as a C-contiguous ndarray, keeping rank 0 (unlike
  np.ascontiguousarray, which makes scalars rank 1)."""
  array = np.asarray(array)
  if array.flags.c_contiguous:
    return array
  return np.array(array, order="C", copy=True)
