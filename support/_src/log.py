"""`VLOG`-style logging over absl.logging.

  from support._src import log
  log.vlog(2, "fused %d ops into %s", n, name)   # Only when verbose enough.
  if log.vlog_is_on(3):
    log.vlog(3, "module:\n%s", expensive_dump())

Verbosity comes from two flags (see `flags.py`), read as glog reads them:
`--v=N` for every module, and `--vmodule=pattern=N,...` per module, where a
module is the calling file's basename without `.py` and `pattern` is a
case-sensitive glob (`fnmatch`). The first matching pattern wins and replaces
`--v` for that module, e.g.

  OPENXLA_FLAGS="--v=1 --vmodule=hlo_pass*=3,buffer_assignment=2"

Lines go out as absl INFO records, with the caller's file and line. When
verbose logging is asked for and absl would drop INFO (no `absl.app`, nobody
configured `logging`), the first emitted line turns on absl's stderr handler
at INFO, as glog prints what `--v` asks for.

absl.logging has its own `vlog`, but it filters by absl's `--verbosity` flag
(owned by the host program's `main`) and has no per-module levels, so the
filtering is written here; the output is absl's.
"""

from __future__ import annotations

import fnmatch
import logging as py_logging
import os
import sys

from absl import logging as absl_logging

from support._src import flags
from support._src import status

INFO = absl_logging.INFO
WARNING = absl_logging.WARNING
ERROR = absl_logging.ERROR


def _parse_vmodule(text: str) -> tuple[tuple[str, int], ...]:
  """'a*=2,b=1' -> (('a*', 2), ('b', 1)); raises ValueError when malformed."""
  entries = []
  for item in text.split(","):
    item = item.strip()
    if not item:
      continue
    pattern, eq, level = item.rpartition("=")
    try:
      if not eq or not pattern:
        raise ValueError
      entries.append((pattern.strip(), int(level)))
    except ValueError:
      raise ValueError(
          f"expected pattern=N[,pattern=N...], got {item!r}") from None
  return tuple(entries)


V = flags.define_int(
    "v", 0, "Verbose logging: vlog(level, ...) lines with level <= v are "
    "shown (for modules --vmodule does not match).")
VMODULE = flags.define_string(
    "vmodule", "", "Per-module verbosity: pattern=N,... where pattern is a "
    "glob on the calling file's basename without .py; the first match wins.",
    validator=_parse_vmodule)

# Per-file verbosity cache, valid for one (--v, --vmodule) pair. Rebuilt (as
# a new dict, so readers in other threads never see a half-built one) when
# either flag changes, e.g. under `flags.override`.
_cache_key: tuple[int, str] | None = None
_cache: dict[str, int] = {}
_vmodule_entries: tuple[tuple[str, int], ...] = ()
_handler_checked = False


def module_name(filename: str) -> str:
  """A file's module name for --vmodule: its basename without `.py`."""
  base = os.path.basename(filename)
  return base[:-3] if base.endswith(".py") else base


def _verbosity(filename: str, v: int, vmodule: str) -> int:
  global _cache_key, _cache, _vmodule_entries
  if _cache_key != (v, vmodule):
    _vmodule_entries = _parse_vmodule(vmodule)
    _cache = {}
    _cache_key = (v, vmodule)
  cache = _cache
  level = cache.get(filename)
  if level is None:
    name = module_name(filename)
    level = v
    for pattern, module_level in _vmodule_entries:
      if fnmatch.fnmatchcase(name, pattern):
        level = module_level
        break
    cache[filename] = level
  return level


def _is_on(level: int, depth: int) -> bool:
  """Whether the frame `depth` levels above our caller logs at `level`."""
  v, vmodule = V.value, VMODULE.value
  if not vmodule:
    return level <= v
  # sys._getframe is CPython's documented frame access; inspect.stack() is
  # the public one but builds every frame's source context, far too slow.
  frame = sys._getframe(depth + 1)  # pylint: disable=protected-access
  filename = frame.f_code.co_filename
  return level <= _verbosity(filename, v, vmodule)


def vlog_is_on(level: int) -> bool:
  """Whether `vlog(level, ...)` called from the caller's module would emit."""
  return _is_on(level, 1)


def _ensure_visible() -> None:
  """Makes INFO lines reach stderr if nobody configured logging (see top)."""
  global _handler_checked
  _handler_checked = True
  logger = absl_logging.get_absl_logger()
  if logger.isEnabledFor(py_logging.INFO):
    return
  if py_logging.getLogger().handlers:
    return  # Someone configured logging on purpose; respect it.
  absl_logging.use_absl_handler()
  absl_logging.set_verbosity(absl_logging.INFO)


@absl_logging.skip_log_prefix
def vlog(level: int, msg: str, *args) -> None:
  """Logs `msg % args` at INFO if the caller's verbosity is >= `level`."""
  if not _is_on(level, 1):
    return
  if not _handler_checked:
    _ensure_visible()
  absl_logging.log(INFO, msg, *args)


@absl_logging.skip_log_prefix
def info(msg: str, *args) -> None:
  absl_logging.log(INFO, msg, *args)


@absl_logging.skip_log_prefix
def warning(msg: str, *args) -> None:
  absl_logging.log(WARNING, msg, *args)


@absl_logging.skip_log_prefix
def error(msg: str, *args) -> None:
  absl_logging.log(ERROR, msg, *args)


def _check_n(n: int) -> None:
  if not isinstance(n, int) or n < 1:
    raise status.InvalidArgumentError(f"n must be a positive int, got {n!r}")


@absl_logging.skip_log_prefix
def log_first_n(level: int, msg: str, n: int, *args) -> None:
  """Logs at absl `level` (INFO, WARNING, ERROR) the first `n` times this
  call site runs."""
  _check_n(n)
  absl_logging.log_first_n(level, msg, n, *args)


@absl_logging.skip_log_prefix
def log_every_n(level: int, msg: str, n: int, *args) -> None:
  """Logs at absl `level` on the 1st, (n+1)th, (2n+1)th... run of this call
  site."""
  _check_n(n)
  absl_logging.log_every_n(level, msg, n, *args)
