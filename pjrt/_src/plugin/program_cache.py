"""A persistent cache of compiled programs, keyed by the program's bytes.

The CPU compiler's own disk cache is keyed by the optimised HLO module's
text, so a hit still parses the StableHLO, imports it to HLO and prints
the module (0.3-0.5 s on a program of a few thousand ops) before it can
look anything up. This cache sits in front of it: the key is a digest of
what the plugin receives (the program's bytes and format, the compile
options as the plugin decodes them, the backend) and of the sources and flags that turn
those into code. An entry records the compiler's key and what the plugin
knows of the program's signature, so a hit loads the compiled code
without parsing the program at all. The StableHLO module is parsed again
only if something asks for it (`Program.stablehlo`).

Where it is: the flag --openxla_cpu_compilation_cache_dir, else the
directory a provider gives (the JAX glue gives JAX's own
`jax_compilation_cache_dir`, which JAX itself uses only for its built-in
platforms), with "openxla_cpu" appended. Unset (the default, as in JAX):
no persistent cache. Programs of one device and one replica on the cpu
backend are cached; others compile as before.

An entry is a small JSON file `<key>.program` beside the compiler's
`<compiler key>.xlacpu` artifact. An unreadable or inconsistent entry is
ignored (and the program compiled again).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from typing import Callable, Optional

import support
from pjrt._src import abi_types
from pjrt._src import dtypes
from pjrt._src.plugin import programs

CACHE_DIR = support.flags.define_string(
    "openxla_cpu_compilation_cache_dir", "",
    "Directory of the openxla_cpu plugin's persistent cache of compiled "
    "programs (empty: JAX's jax_compilation_cache_dir when the JAX glue is "
    "loaded, else none).")

_SUBDIRECTORY = "openxla_cpu"
_FORMAT = 1
_provider: Optional[Callable[[], Optional[str]]] = None
_sources: Optional[str] = None
_lock = threading.Lock()


def set_directory_provider(provider: Optional[Callable[[], Optional[str]]]
                           ) -> None:
  """`provider()` gives the cache's base directory when the flag is unset
  (None or "": no cache)."""
  global _provider
  _provider = provider


def directory() -> Optional[str]:
  """The cache's directory, or None when there is no persistent cache."""
  base = CACHE_DIR.value
  if not base and _provider is not None:
    try:
      base = _provider()
    except Exception:  # pylint: disable=broad-except
      base = None
  if not base:
    return None
  base = str(base)
  if "://" in base:
    # A remote store (JAX's cache takes gs:// paths): only local
    # directories are supported here.
    support.log.log_first_n(
        support.log.WARNING,
        "openxla_cpu program cache: %s is not a local directory; not "
        "caching", 1, base)
    return None
  return os.path.join(os.path.expanduser(base), _SUBDIRECTORY)


def _source_digest() -> str:
  """Name, size and modification time of every Python source of the
  packages that turn a program into code, once per process."""
  global _sources
  with _lock:
    if _sources is None:
      h = hashlib.sha256()
      here = os.path.dirname(os.path.abspath(__file__))
      root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
      for package in ("support", "stablehlo", "xla", "pjrt"):
        for path, dirs, files in os.walk(os.path.join(root, package)):
          dirs.sort()
          for name in sorted(files):
            if name.endswith(".py") and not name.endswith("_test.py"):
              st = os.stat(os.path.join(path, name))
              h.update(f"{path}/{name}:{st.st_size}:{st.st_mtime_ns}\0"
                       .encode())
      _sources = h.hexdigest()
    return _sources


def _non_default_flags() -> str:
  return repr(sorted((f.name, repr(f.value))
                     for f in support.flags.all_flags()
                     if f.value != f.default and f.name != CACHE_DIR.name))


def _digest(parts) -> str:
  digest = hashlib.sha256()
  for part in parts:
    digest.update(len(part).to_bytes(8, "little"))
    digest.update(part)
  return digest.hexdigest()


def key(code: bytes, fmt: str, options: object, backend: str,
        fallback: bool) -> str:
  """The cache key of compiling `code` with the decoded compile options
  `options`. Not their bytes: JAX's serialized options hold maps whose
  entries come in a different order in every process."""
  return _digest([b"openxla_cpu program cache", str(_FORMAT).encode(),
                  _source_digest().encode(), fmt.encode(),
                  repr(options).encode(), backend.encode(),
                  str(bool(fallback)).encode(),
                  _non_default_flags().encode(), bytes(code)])


def compile_key(code: bytes, fmt: str, config: object,
                with_sources: bool) -> str:
  """A digest of what the HLO module the cpu backend compiles for `code`
  is built from (the program, the partitioning `config`, the flags), which
  the compiler uses in place of the module's text in its cache key
  (CpuCompileOptions.input_key). `with_sources`: also the sources that
  build it, for keys that outlive the process (a disk cache)."""
  parts = [b"openxla_cpu compile key", fmt.encode(), repr(config).encode(),
           _non_default_flags().encode(), bytes(code)]
  if with_sources:
    parts.append(_source_digest().encode())
  return _digest(parts)


def _path(cache_dir: str, program_key: str) -> str:
  return os.path.join(cache_dir, f"{program_key}.program")


def _describe(t: programs.ArrayType) -> list:
  return [int(t.element_type), list(t.shape)]


def _array_type(entry) -> programs.ArrayType:
  element_type, shape = entry
  element_type = abi_types.BufferType(int(element_type))
  return programs.ArrayType(element_type, dtypes.storage_dtype(element_type),
                            tuple(int(d) for d in shape))


def store(cache_dir: str, program_key: str, program: programs.Program,
          compiler_key: str) -> None:
  """Records that `program` compiled to the compiler's entry
  `compiler_key`."""
  entry = {
      "format": _FORMAT, "compiler_key": compiler_key,
      "name": program.name, "entry": program.entry,
      "parameters": [_describe(p) for p in program.parameters],
      "results": [_describe(r) for r in program.results],
      "aliases": sorted([int(p), int(r)] for p, r in program.aliases.items()),
      "donors": sorted(int(d) for d in program.donors),
      "uses_collectives": bool(program.uses_collectives),
  }
  try:
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-",
                               suffix=".part")
    with os.fdopen(fd, "w") as f:
      json.dump(entry, f)
    os.replace(tmp, _path(cache_dir, program_key))
  except OSError as e:
    support.log.warning("openxla_cpu program cache: cannot write %s: %s",
                        cache_dir, e)


def lookup(cache_dir: str, program_key: str, code: bytes, fmt: str
           ) -> Optional[tuple[programs.Program, str]]:
  """(the program, rebuilt from the entry without parsing it, and the
  compiler's key) for `program_key`, or None."""
  try:
    with open(_path(cache_dir, program_key)) as f:
      entry = json.load(f)
  except (OSError, ValueError):
    return None
  try:
    if entry["format"] != _FORMAT:
      return None
    program = programs.Program(
        code=bytes(code), format=fmt, module=None, entry=str(entry["entry"]),
        name=str(entry["name"]),
        parameters=[_array_type(p) for p in entry["parameters"]],
        results=[_array_type(r) for r in entry["results"]],
        aliases={int(p): int(r) for p, r in entry["aliases"]},
        donors=frozenset(int(d) for d in entry["donors"]),
        uses_collectives=bool(entry["uses_collectives"]))
    return program, str(entry["compiler_key"])
  except (KeyError, TypeError, ValueError) as e:
    support.log.warning("openxla_cpu program cache: ignoring entry %s: %s",
                        program_key, e)
    return None
