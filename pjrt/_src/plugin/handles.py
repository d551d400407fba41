"""Opaque handles: the addresses that stand for plugin objects in the C API.

The C API passes objects as pointers (`PJRT_Buffer*`, `PJRT_Device*`, ...).
Ours are addresses of 8-byte slots in memory this module owns, so that a
caller that dereferences one (a `PJRT_Error*` or `PJRT_Memory*` starts with
a vtable pointer in newer headers) reads our memory, never garbage. Each
address maps to (C type name, Python object) in a table; a lookup checks the
type, so a destroyed handle, a handle of another type or a made-up address is
reported as an error instead of being used.

Freed slots are reused only after `QUARANTINE` later frees, so a stale
handle keeps failing cleanly for a long while instead of silently naming a
new object, while memory stays bounded in long runs.
"""

from __future__ import annotations

import collections
import ctypes
import threading
from typing import Any

import support

SLOT_SIZE = ctypes.sizeof(ctypes.c_void_p)
_CHUNK_SLOTS = 8192
QUARANTINE = 1 << 16


def immortal(obj: Any) -> Any:
  """Adds a reference that is never dropped, and returns `obj`.

  For what C code holds (callback thunks, tables, handle memory): it must
  outlive the interpreter's teardown, during which module globals are
  collected while JAX still destroys its buffers and clients through our
  slots.
  """
  ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
  return obj


class HandleTable:
  """Addresses <-> (type name, object), thread-safe."""

  def __init__(self, quarantine: int = QUARANTINE):
    self._lock = threading.Lock()
    self._objects: dict[int, tuple[str, Any]] = {}
    self._chunks: list[Any] = []  # Keeps the slot memory alive.
    self._next = 0
    self._end = 0
    self._freed: collections.deque[int] = collections.deque()
    self._quarantine = quarantine

  def _allocate(self) -> int:
    if len(self._freed) > self._quarantine:
      address = self._freed.popleft()
      ctypes.c_void_p.from_address(address).value = None
    else:
      if self._next >= self._end:
        chunk = immortal(ctypes.create_string_buffer(SLOT_SIZE *
                                                     _CHUNK_SLOTS))
        self._chunks.append(chunk)
        self._next = ctypes.addressof(chunk)
        self._end = self._next + SLOT_SIZE * _CHUNK_SLOTS
      address = self._next  # Fresh chunk memory is zeroed already.
      self._next += SLOT_SIZE
    return address

  def add(self, kind: str, obj: Any) -> int:
    """A new handle of C type `kind` (e.g. "PJRT_Buffer") for `obj`."""
    with self._lock:
      address = self._allocate()
      self._objects[address] = (kind, obj)
      return address

  def _entry(self, address: int | None, kind: str) -> Any:
    if not address:
      raise support.InvalidArgumentError(f"{kind} is NULL")
    entry = self._objects.get(address)
    if entry is None:
      raise support.InvalidArgumentError(
          f"{kind} {address:#x} is not a live object of this plugin (it was "
          "destroyed, or never created)")
    if entry[0] != kind:
      raise support.InvalidArgumentError(
          f"expected a {kind}, but {address:#x} is a {entry[0]}")
    return entry[1]

  def get(self, address: int | None, kind: str) -> Any:
    """The object behind handle `address`, which must be of type `kind`.

    Raises:
      support.InvalidArgumentError: NULL, unknown, destroyed, or another type.
    """
    return self._entry(address, kind)

  def remove(self, address: int | None, kind: str) -> Any:
    """Forgets handle `address` (of type `kind`); returns its object."""
    with self._lock:
      obj = self._entry(address, kind)
      del self._objects[address]
      self._freed.append(address)
      return obj

  def __len__(self) -> int:
    return len(self._objects)

  def count(self, kind: str) -> int:
    """Live handles of type `kind` (for tests and leak checks)."""
    with self._lock:
      return sum(1 for k, _ in self._objects.values() if k == kind)


# The plugin's one table: every object of every client lives here.
TABLE = HandleTable()
