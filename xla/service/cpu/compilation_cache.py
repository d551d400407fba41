"""The CPU compilation cache: in memory, and optionally on disk.

Key: sha256 over the printed HLO module (before any pass), the options
that change the generated code (opt level, disabled passes), the compiler
version string and the host CPU (name and features: the machine code is
specific to them).

An entry is the compiled *artifact*: the thunk plan (JSON), the object
code of the kernels, and the HLO text of each custom-call instruction (so
a handler still receives an `HloInstruction`). In memory the artifact is
kept with its loaded JIT, so a hit costs only building the executable.
On disk one file per key:

    XLACPU1\\n
    <header JSON: key, version, sizes and sha256 of each part>\\n
    <plan JSON><object code><custom calls JSON>

A file that is truncated, bit-flipped, for another key or version, or does
not parse is *never trusted*: `load` returns None (and removes the file),
and the caller recompiles and rewrites it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import threading
from typing import Optional

from support import log

# Bump when the plan format, the emitters or the runtime change in a way
# that makes old artifacts wrong.
COMPILER_VERSION = "xla-cpu-core-2"
_MAGIC = b"XLACPU1\n"


@dataclasses.dataclass
class Artifact:
  plan: dict
  object_code: bytes
  custom_calls: list  # HLO module text per custom call, or None
  jit: object = None  # a loaded CpuJit (memory cache only)
  custom_call_instrs: list = dataclasses.field(default_factory=list)


def fingerprint(module_text: str, options_key: str, host: str) -> str:
  h = hashlib.sha256()
  for part in (COMPILER_VERSION, host, options_key, module_text):
    data = part.encode("utf-8")
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)
  return h.hexdigest()


class CompilationCache:
  """Thread-safe memory cache with an optional disk directory."""

  def __init__(self, max_entries: int = 256):
    self._lock = threading.Lock()
    self._memory: dict[str, Artifact] = {}
    self._order: list[str] = []
    self.max_entries = max_entries
    self.stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0,
                  "corrupt": 0, "writes": 0}

  # -- memory -----------------------------------------------------------------

  def get(self, key: str) -> Optional[Artifact]:
    with self._lock:
      art = self._memory.get(key)
      if art is not None:
        self.stats["memory_hits"] += 1
      return art

  def put(self, key: str, art: Artifact) -> None:
    with self._lock:
      if key not in self._memory:
        self._order.append(key)
      self._memory[key] = art
      while len(self._order) > self.max_entries:
        self._memory.pop(self._order.pop(0), None)

  def count_miss(self) -> None:
    """Counts a lookup that found the program in neither the memory nor
    the disk cache (the caller then compiles it)."""
    with self._lock:
      self.stats["misses"] += 1

  def clear(self) -> None:
    with self._lock:
      self._memory.clear()
      self._order.clear()

  # -- disk ---------------------------------------------------------------------

  @staticmethod
  def path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, f"{key}.xlacpu")

  def load(self, cache_dir: str, key: str) -> Optional[Artifact]:
    """The artifact stored for `key`, or None (missing or not trusted)."""
    path = self.path(cache_dir, key)
    try:
      with open(path, "rb") as f:
        data = f.read()
    except OSError:
      return None
    art = _decode(data, key)
    if art is None:
      with self._lock:
        self.stats["corrupt"] += 1
      log.warning("CPU compilation cache: ignoring corrupt entry %s", path)
      try:
        os.remove(path)
      except OSError:
        pass
      return None
    with self._lock:
      self.stats["disk_hits"] += 1
    return art

  def store(self, cache_dir: str, key: str, art: Artifact) -> None:
    """Writes the entry atomically (temp file + rename)."""
    data = _encode(key, art)
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-", suffix=".part")
    try:
      with os.fdopen(fd, "wb") as f:
        f.write(data)
      os.replace(tmp, self.path(cache_dir, key))
    except OSError as e:
      log.warning("CPU compilation cache: cannot write %s: %s", cache_dir, e)
      try:
        os.remove(tmp)
      except OSError:
        pass
      return
    with self._lock:
      self.stats["writes"] += 1


def _sha(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def _encode(key: str, art: Artifact) -> bytes:
  parts = [json.dumps(art.plan, separators=(",", ":")).encode("utf-8"),
           bytes(art.object_code),
           json.dumps(art.custom_calls).encode("utf-8")]
  header = {"key": key, "version": COMPILER_VERSION,
            "sizes": [len(p) for p in parts],
            "sha256": [_sha(p) for p in parts]}
  header["header_sha256"] = _sha(json.dumps(
      header, sort_keys=True).encode("utf-8"))
  return (_MAGIC + json.dumps(header, sort_keys=True).encode("utf-8") +
          b"\n" + b"".join(parts))


def _decode(data: bytes, key: str) -> Optional[Artifact]:
  try:
    if not data.startswith(_MAGIC):
      return None
    rest = data[len(_MAGIC):]
    nl = rest.index(b"\n")
    header = json.loads(rest[:nl].decode("utf-8"))
    body = rest[nl + 1:]
    expect = header.pop("header_sha256")
    if _sha(json.dumps(header, sort_keys=True).encode("utf-8")) != expect:
      return None
    if header["key"] != key or header["version"] != COMPILER_VERSION:
      return None
    sizes, shas = header["sizes"], header["sha256"]
    if len(sizes) != 3 or sum(sizes) != len(body):
      return None
    parts, off = [], 0
    for size, sha in zip(sizes, shas):
      part = body[off:off + size]
      off += size
      if _sha(part) != sha:
        return None
      parts.append(part)
    plan = json.loads(parts[0].decode("utf-8"))
    custom = json.loads(parts[2].decode("utf-8"))
    if not isinstance(plan, dict) or not isinstance(custom, list):
      return None
    return Artifact(plan, parts[1], custom)
  except (ValueError, KeyError, TypeError, UnicodeDecodeError):
    return None


CACHE = CompilationCache()
