"""`TraceMe`-style scopes that write Chrome trace JSON.

  from support._src import trace

  with trace.scope("compile", module=name):
    ...

  @trace.traced
  def run_pass(module): ...

Open the result in `chrome://tracing` or https://ui.perfetto.dev. The file is
the Trace Event Format's JSON object form, `{"traceEvents": [...]}`, with
complete events (`"ph": "X"`, `ts`/`dur` in microseconds), instant events
(`"i"`), counters (`"C"`) and thread-name metadata (`"M"`).

Tracing is off unless `start()` was called or `--trace_to=path` is set (then
it starts at the first traced scope and the file is written at exit). When
off, `scope()` is one module-level check returning a shared no-op object.

Scopes nest per thread (each thread keeps its own stack of open scopes); one
lock guards the event list. A scope records its event when it closes, with
its start time taken when it opened, so children always lie inside parents.

Why not a library: `viztracer`/`torch.profiler` trace every call or need a
framework; what is wanted here is a handful of named, explicit scopes in
Chrome's format, which is a few dozen lines of stdlib.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import threading
import time
from typing import Any, Callable, TypeVar

from support._src import flags
from support._src import status

TRACE_TO = flags.define_string(
    "trace_to", "", "Record trace.scope() spans from the first one on and "
    "write them as Chrome trace JSON (chrome://tracing, Perfetto) to this "
    "path at process exit.")

F = TypeVar("F", bound=Callable[..., Any])


class _Session:
  """The events of one start()..stop() period."""

  def __init__(self, path: str | None = None):
    self.path = path  # Where atexit writes the trace, for --trace_to.
    self.origin_ns = time.perf_counter_ns()
    self.pid = os.getpid()
    self.lock = threading.Lock()
    self.events: list[dict[str, Any]] = []
    self.threads: dict[int, str] = {}  # tid -> thread name
    self.active = True

  def now_us(self) -> float:
    return (time.perf_counter_ns() - self.origin_ns) / 1000.0

  def add(self, event: dict[str, Any]) -> None:
    tid = event["tid"]
    with self.lock:
      if not self.active:
        return  # A scope that closes after stop() is dropped.
      if tid not in self.threads:
        self.threads[tid] = threading.current_thread().name
      self.events.append(event)

  def to_json(self) -> dict[str, Any]:
    with self.lock:
      events = list(self.events)
      threads = dict(self.threads)
    # Parents before children at equal start times: longer spans first.
    events.sort(key=lambda e: (e["ts"], -e.get("dur", 0.0)))
    meta = [{"name": "process_name", "ph": "M", "pid": self.pid, "tid": 0,
             "args": {"name": "openxla"}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": self.pid, "tid": tid,
              "args": {"name": name}} for tid, name in sorted(threads.items())]
    return {"traceEvents": meta + events, "displayTimeUnit": "ms"}


# Module state. `_enabled` is None until `--trace_to` has been looked at (the
# first scope does it, so importing this module reads no flag), then a bool.
_enabled: bool | None = None
_session: _Session | None = None
_state_lock = threading.Lock()
_local = threading.local()


def _stack() -> list["_Scope"]:
  stack = getattr(_local, "stack", None)
  if stack is None:
    stack = _local.stack = []
  return stack


def _start_from_flag() -> bool:
  """Starts tracing if --trace_to is set; returns whether tracing is on."""
  global _enabled, _session
  path = TRACE_TO.value
  with _state_lock:
    if _enabled is None:
      if path:
        _session = _Session(path)
      _enabled = bool(path)
    return bool(_enabled)


def is_enabled() -> bool:
  """Whether scopes are being recorded now."""
  if _enabled is None:
    return _start_from_flag()
  return _enabled


def start() -> None:
  """Starts recording (dropping anything recorded before)."""
  global _enabled, _session
  with _state_lock:
    if _session is not None:
      _session.active = False
    _session = _Session()
    _enabled = True


def stop(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
  """Stops recording; returns the trace and writes it to `path` if given."""
  global _enabled, _session
  with _state_lock:
    session = _session
    if session is None or not _enabled:
      raise status.FailedPreconditionError("trace.stop(): tracing is not on")
    _session = None
    _enabled = False
    with session.lock:
      session.active = False
  trace = session.to_json()
  if path is not None:
    _write(trace, path)
  return trace


def _write(trace: dict[str, Any], path: str | os.PathLike[str]) -> None:
  path = os.fspath(path)
  directory = os.path.dirname(path)
  if directory:
    os.makedirs(directory, exist_ok=True)
  tmp = f"{path}.tmp{os.getpid()}"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(trace, f, default=str)
  os.replace(tmp, path)


def _tid() -> int:
  return threading.get_native_id()


class _Scope:
  """An open span; records one complete event when it closes."""

  __slots__ = ("name", "args", "_session", "_start_us")

  def __init__(self, name: str, args: dict[str, Any]):
    self.name = name
    self.args = args

  def set_args(self, **args: Any) -> None:
    """Adds args known only inside the scope (TraceMe's AppendMetadata)."""
    self.args.update(args)

  def __enter__(self) -> "_Scope":
    session = _session
    self._session = session
    self._start_us = session.now_us() if session is not None else 0.0
    _stack().append(self)
    return self

  def __exit__(self, exc_type, exc, tb) -> None:
    stack = _stack()
    if stack and stack[-1] is self:
      stack.pop()
    elif self in stack:
      # Closed out of order: a scope held open across a generator's `yield`
      # or an `await`. Chrome draws the overlap; we just keep the stack right.
      stack.remove(self)
    session = self._session
    if session is None:
      return
    end_us = session.now_us()
    event = {"name": self.name, "ph": "X", "ts": self._start_us,
             "dur": end_us - self._start_us, "pid": session.pid,
             "tid": _tid()}
    if exc_type is not None:
      self.args["error"] = exc_type.__name__
    if self.args:
      event["args"] = self.args
    session.add(event)


class _NullScope:
  """What scope() returns when tracing is off."""

  __slots__ = ()

  def set_args(self, **args: Any) -> None:
    pass

  def __enter__(self) -> "_NullScope":
    return self

  def __exit__(self, exc_type, exc, tb) -> None:
    pass


_NULL_SCOPE = _NullScope()


def scope(name: str, **args: Any) -> _Scope | _NullScope:
  """A span named `name` with `args`, for a `with` statement."""
  if _enabled:
    return _Scope(name, args)
  if _enabled is None and _start_from_flag():
    return _Scope(name, args)
  return _NULL_SCOPE


def current_scope_names() -> list[str]:
  """Names of this thread's open (recorded) scopes, outermost first."""
  return [s.name for s in _stack()]


def traced(func: F | None = None, *, name: str | None = None) -> Any:
  """Decorator: runs each call of the function inside a scope.

  Use as `@traced` (named after the function's qualified name) or
  `@traced(name="...")`.
  """
  def decorate(fn: F) -> F:
    span_name = name or getattr(fn, "__qualname__", repr(fn))

    @functools.wraps(fn)
    def wrapper(*a, **kw):
      if not _enabled and not (_enabled is None and _start_from_flag()):
        return fn(*a, **kw)
      with _Scope(span_name, {}):
        return fn(*a, **kw)
    return wrapper  # type: ignore[return-value]

  if func is not None:
    return decorate(func)
  return decorate


def instant(name: str, **args: Any) -> None:
  """Records a point in time on this thread (an "i" event)."""
  if not is_enabled():
    return
  session = _session
  if session is None:
    return
  event = {"name": name, "ph": "i", "s": "t", "ts": session.now_us(),
           "pid": session.pid, "tid": _tid()}
  if args:
    event["args"] = args
  session.add(event)


def counter(name: str, **values: float) -> None:
  """Records counter values (a "C" event; each key is one series)."""
  if not is_enabled():
    return
  session = _session
  if session is None:
    return
  session.add({"name": name, "ph": "C", "ts": session.now_us(),
               "pid": session.pid, "tid": _tid(), "args": values})


def _write_at_exit() -> None:
  """Writes the --trace_to session, if any, when the process exits."""
  try:
    if _enabled is None:
      _start_from_flag()  # Flag set but nothing traced: write an empty trace.
  except status.XlaError:
    return  # A bad $OPENXLA_FLAGS; reported wherever flags were read.
  session = _session
  if session is not None and session.path:
    with session.lock:
      session.active = False
    _write(session.to_json(), session.path)


atexit.register(_write_at_exit)
