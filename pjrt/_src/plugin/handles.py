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

Each handle is in fact a `RECORD_SIZE`-byte record, a C-side mirror that
native code reads without the GIL (native_slots.py answers the hot query
slots from it):

  word 0   always 0 (a caller may read it as a vtable pointer)
  word 1   the type tag: `tag(kind)` while the handle is live, 0 once freed
  2..15    fields that a mirror function registered for the kind
           (`register_mirror`) writes when the handle is made; an owner
           updates mutable ones with `HandleTable.update`.

The plugin's one table (`TABLE`) takes its records from one reserved
region (`region()`), so native code can tell a record of ours from any
other address with a range check before reading it; records beyond the
region (or of other tables) are never answered natively.
"""

from __future__ import annotations

import collections
import ctypes
import mmap
import threading
from typing import Any, Callable, Optional

import support

SLOT_SIZE = ctypes.sizeof(ctypes.c_void_p)
RECORD_SIZE = 128
RECORD_WORDS = RECORD_SIZE // SLOT_SIZE
TAG_WORD = 1
# A buffer record's state word (native_slots.BUFFER_WORDS).
STATE_WORD = 2
_CHUNK_SLOTS = 1024
QUARANTINE = 1 << 16
# Records in the region of TABLE (virtual memory, committed as touched).
REGION_RECORDS = 1 << 20
# Records at the region's end that native code allocates.
NATIVE_RECORDS = 1 << 18

# Kind -> the nonzero tag word of its live records.
_TAG_BASE = 0x4A52505F00000000  # "_PRJ" in the high half: unlikely data.
_TAGS: dict[str, int] = {}
# Kind -> fn(obj) -> up to 14 ints for words 2..15 of its records.
_MIRRORS: dict[str, Callable[[Any], tuple[int, ...]]] = {}


def tag(kind: str) -> int:
  """The tag word of live records of C type `kind` (stable per process)."""
  value = _TAGS.get(kind)
  if value is None:
    value = _TAGS.setdefault(kind, _TAG_BASE + len(_TAGS) + 1)
  return value


def register_mirror(kind: str,
                    fn: Callable[[Any], tuple[int, ...]]) -> None:
  """Makes every new handle of `kind` carry `fn(obj)` in words 2.. ."""
  _MIRRORS[kind] = fn


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

  def __init__(self, quarantine: int = QUARANTINE, region_records: int = 0):
    # Reentrant: code run under the lock (the adopter, a new chunk) may
    # allocate, and a garbage collection then may finalize an object whose
    # finalizer removes its own handle on this thread; with a plain lock
    # that thread waited for itself forever.
    self._lock = threading.RLock()
    self._objects: dict[int, tuple[str, Any]] = {}
    self._chunks: list[Any] = []  # Keeps the record memory alive.
    # (first record, end, the chunk as u64s, the chunk's address)
    self._views: list[tuple[int, int, memoryview, int]] = []
    self._next = 0
    self._end = 0
    self._freed: collections.deque[int] = collections.deque()
    self._quarantine = quarantine
    self.region_start = self.region_end = 0
    self.native_start = self.native_end = 0
    # fn(address) -> (kind, object) or None, under the table's lock: a
    # record of the native range that the table does not know yet.
    self.adopter: Optional[Callable[[int], Optional[tuple[str, Any]]]] = None
    # fn(address): takes back a removed record of the native range.
    self.releaser: Optional[Callable[[int], None]] = None
    # fn(address, state): see `retire`.
    self.retirer: Optional[Callable[[int, int], None]] = None
    if region_records:
      self._new_chunk(region_records, use_mmap=True)
      self.region_start, self.region_end = self._next, self._end
      native = min(NATIVE_RECORDS, region_records // 2) * RECORD_SIZE
      self.native_start, self.native_end = self._end - native, self._end
      self._end = self.native_start

  def _new_chunk(self, records: int, use_mmap: bool = False) -> None:
    size = RECORD_SIZE * records
    if use_mmap:
      memory = mmap.mmap(-1, size)  # Anonymous: zeroed, page aligned.
      start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    else:
      memory = ctypes.create_string_buffer(size + RECORD_SIZE)
      start = -(-ctypes.addressof(memory) // RECORD_SIZE) * RECORD_SIZE
    self._chunks.append(immortal(memory))
    words = immortal(memoryview(memory).cast("B").cast("Q"))
    base = (start if use_mmap else ctypes.addressof(memory))
    self._views.append((start, start + size, words, base))
    self._next, self._end = start, start + size

  def _words(self, address: int) -> tuple[memoryview, int]:
    """The u64 view holding record `address`, and the record's index."""
    start, end, words, base = self._views[0]
    if start <= address < end:
      return words, (address - base) >> 3
    for start, end, words, base in reversed(self._views):
      if start <= address < end:
        return words, (address - base) // SLOT_SIZE
    raise support.InternalError(f"{address:#x} is no record of this table")

  def _allocate(self) -> int:
    if len(self._freed) > self._quarantine:
      address = self._freed.popleft()
      words, i = self._words(address)
      words[i:i + RECORD_WORDS] = _ZERO_RECORD
    else:
      if self._next >= self._end:
        self._new_chunk(_CHUNK_SLOTS)
      address = self._next  # Fresh chunk memory is zeroed already.
      self._next += RECORD_SIZE
    return address

  def add(self, kind: str, obj: Any, *, tag_as: Optional[str] = None) -> int:
    """A new handle of C type `kind` (e.g. "PJRT_Buffer") for `obj`.

    `tag_as` gives its record the tag (and mirror) of another kind name, for
    handles that native code treats specially (a shared ready event).
    """
    mirror_kind = tag_as or kind
    # Only a table with a region is read natively, so only its records
    # carry mirrored fields.
    mirror = _MIRRORS.get(mirror_kind) if self.region_end else None
    fields = mirror(obj) if mirror is not None else ()
    with self._lock:
      address = self._allocate()
      words, i = self._words(address)
      for k, value in enumerate(fields, 2):
        words[i + k] = value & 0xFFFFFFFFFFFFFFFF
      words[i + TAG_WORD] = tag(mirror_kind)
      self._objects[address] = (kind, obj)
      return address

  def update(self, address: int, obj: Any, word: int, value: int) -> None:
    """Sets word `word` of live handle `address` if it still names `obj`
    (a no-op for a destroyed or reused handle)."""
    entry = self._objects.get(address)
    if entry is not None and entry[1] is obj:
      words, i = self._words(address)
      words[i + word] = value & 0xFFFFFFFFFFFFFFFF

  def retire(self, address: int, obj: Any, value: int) -> None:
    """Sets the state word of live buffer handle `address` (if it still
    names `obj`) to `value`, a state in which native code does not read
    its data, and returns once no native execution reads it any more
    (through the table's `retirer`, where native execution is on)."""
    entry = self._objects.get(address)
    if entry is None or entry[1] is not obj:
      return
    if self.retirer is not None:
      self.retirer(address, value)
    else:
      words, i = self._words(address)
      words[i + STATE_WORD] = value

  def get_unlocked(self, address: int, kind: str) -> Any:
    """The live object of type `kind` behind `address`, or None; for code
    that holds the table's lock (an adopter)."""
    entry = self._objects.get(address)
    return entry[1] if entry is not None and entry[0] == kind else None

  def names(self, address: int, obj: Any) -> bool:
    """Whether live handle `address` stands for `obj`."""
    entry = self._objects.get(address)
    return entry is not None and entry[1] is obj

  def word(self, address: int, word: int) -> int:
    """Word `word` of record `address` (for tests)."""
    words, i = self._words(address)
    return words[i + word]

  def _entry(self, address: int | None, kind: str, adopt: bool = True) -> Any:
    if not address:
      raise support.InvalidArgumentError(f"{kind} is NULL")
    entry = self._objects.get(address)
    if (entry is None and adopt and
        self.native_start <= address < self.native_end):
      entry = self._adopt(address)
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

  def _adopt(self, address: int) -> Optional[tuple[str, Any]]:
    adopter = self.adopter
    if adopter is None or address % RECORD_SIZE:
      return None
    with self._lock:
      entry = self._objects.get(address)
      if entry is None:
        entry = adopter(address)
        if entry is not None:
          self._objects[address] = entry
      return entry

  def remove(self, address: int | None, kind: str) -> Any:
    """Forgets handle `address` (of type `kind`); returns its object."""
    self._entry(address, kind)  # Adopts a native record first.
    native = self.native_start <= address < self.native_end
    with self._lock:
      obj = self._entry(address, kind, adopt=False)
      words, i = self._words(address)
      words[i + TAG_WORD] = 0
      del self._objects[address]
      if not native:
        self._freed.append(address)
    if native and self.releaser is not None:
      self.releaser(address)
    return obj

  def __len__(self) -> int:
    return len(self._objects)

  def count(self, kind: str) -> int:
    """Live handles of type `kind` (for tests and leak checks)."""
    with self._lock:
      return sum(1 for k, _ in self._objects.values() if k == kind)


_ZERO_RECORD = memoryview(bytes(RECORD_SIZE)).cast("Q")


# The plugin's one table: every object of every client lives here.
TABLE = HandleTable(region_records=REGION_RECORDS)
