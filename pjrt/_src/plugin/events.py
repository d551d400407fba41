"""Futures behind PJRT_Event, and how a PJRT_Event_OnReady callback is called.

A `Future` completes once, with or without an error (a `(code, message)`
pair). Buffers and executions own futures; a `PJRT_Event*` handed to the
caller is a handle to an `EventRef`, which only points at a future, so
destroying an event never affects the work it watches, and several events
may watch one future.

Callbacks run once the future completes: on the thread that completes it,
or at once on the registering thread when it already has. A C callback
(PJRT_Event_OnReadyCallback) receives a fresh PJRT_Error* it owns, or NULL.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Optional

import support
from pjrt._src.plugin import errors
from pjrt._src.plugin import handles

KIND = "PJRT_Event"

Status = Optional[tuple[int, str]]  # None: success.

_ON_READY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class Future:
  """A one-shot completion with an optional error.

  Cheap to make and to complete: a pending future holds a plain lock; the
  `threading.Event` a blocking `wait` needs is made only when a thread
  actually waits on a pending future. A future made complete (`ready`)
  takes no lock at all.
  """

  __slots__ = ("_done", "_status", "_callbacks", "_lock", "_waiter")

  def __init__(self):
    self._done = False
    self._status: Status = None
    self._callbacks: list[Callable[[Status], None]] | None = None
    self._lock = threading.Lock()
    self._waiter: threading.Event | None = None

  @classmethod
  def ready(cls, status: Status = None) -> "Future":
    """A future that is already complete with `status` (the one shared
    DONE future for success: a complete future never changes)."""
    if status is None and DONE is not None:
      return DONE
    future = cls.__new__(cls)
    future._done = True
    future._status = status
    future._callbacks = None
    future._lock = _READY_LOCK
    future._waiter = None
    return future

  def set(self, status: Status = None) -> bool:
    """Completes the future; returns False if it already was complete."""
    with self._lock:
      if self._done:
        return False
      self._status = status
      self._done = True
      callbacks, self._callbacks = self._callbacks, None
      waiter = self._waiter
    if waiter is not None:
      waiter.set()
    if callbacks:
      for callback in callbacks:
        _run_callback(callback, status)
    return True

  def set_exception(self, exc: BaseException) -> bool:
    return self.set(errors.status_of(exc))

  def is_ready(self) -> bool:
    return self._done

  def succeeded(self) -> bool:
    """Whether the future is complete without error (never blocks)."""
    return self._done and self._status is None

  def wait(self, timeout: float | None = None) -> Status:
    """Blocks until complete; returns the status (None: success)."""
    if self._done:
      return self._status
    with self._lock:
      if self._done:
        return self._status
      waiter = self._waiter
      if waiter is None:
        waiter = self._waiter = threading.Event()
    if not waiter.wait(timeout):
      raise support.DeadlineExceededError("the event did not complete")
    return self._status

  @property
  def status(self) -> Status:
    """The status of a completed future (None while pending or on success)."""
    return self._status

  def raise_if_error(self) -> None:
    status = self._status if self._done else self.wait()
    if status is not None:
      raise support.error_for_code(support.StatusCode(status[0]), status[1])

  def add_callback(self, callback: Callable[[Status], None]) -> None:
    """Calls `callback(status)` once complete (now, if it already is)."""
    if not self._done:
      with self._lock:
        if not self._done:
          if self._callbacks is None:
            self._callbacks = [callback]
          else:
            self._callbacks.append(callback)
          return
    _run_callback(callback, self._status)


# The lock of every future made complete by `ready` (only ever held for
# an instant by a `set` that then finds the future complete).
_READY_LOCK = threading.Lock()
DONE = None
DONE = Future.ready()  # Complete without error; shared.


def _run_callback(callback, status: Status) -> None:
  try:
    callback(status)
  except BaseException:  # pylint: disable=broad-except
    pass  # A callback must not break the completion of the others.


def all_of(futures: list[Future]) -> Future:
  """A future completing when all of `futures` have (the first error wins)."""
  result = Future()
  if not futures:
    result.set()
    return result
  remaining = [len(futures)]
  first_error: list[Status] = [None]
  lock = threading.Lock()

  def one_done(status: Status) -> None:
    with lock:
      if status is not None and first_error[0] is None:
        first_error[0] = status
      remaining[0] -= 1
      done = remaining[0] == 0
    if done:
      result.set(first_error[0])

  for future in futures:
    future.add_callback(one_done)
  return result


class EventRef:
  """What a PJRT_Event* handle stands for: a view of one future."""

  __slots__ = ("future",)

  def __init__(self, future: Future):
    self.future = future


# The one PJRT_Event* that stands for every future complete without error:
# it is never freed (destroying it does nothing), and native code
# (native_slots.py) answers the event slots for it without Python.
READY_TAG = "PJRT_Event(ready)"
_ready_lock = threading.Lock()
_ready_event: list[int] = []


def ready_event() -> int:
  """The shared PJRT_Event* of a successful completion."""
  if not _ready_event:
    with _ready_lock:
      if not _ready_event:
        _ready_event.append(handles.TABLE.add(
            KIND, EventRef(Future.ready()), tag_as=READY_TAG))
  return _ready_event[0]


def new_event(future: Future) -> int:
  """A PJRT_Event* for `future` (the caller destroys it): the shared ready
  event when the future already completed without error."""
  if future.succeeded():
    return _ready_event[0] if _ready_event else ready_event()
  return handles.TABLE.add(KIND, EventRef(future))


def get(address: int) -> Future:
  return handles.TABLE.get(address, KIND).future


def destroy(address: int) -> None:
  if _ready_event and address == _ready_event[0]:
    return
  handles.TABLE.remove(address, KIND)


def error_of(status: Status) -> int | None:
  """A new PJRT_Error* for a failed status, or None for success."""
  if status is None:
    return None
  return errors.new_error(*status)


def call_c_callback(function: int, user_arg: int | None,
                    status: Status) -> None:
  """Calls a PJRT_Event_OnReadyCallback, handing it a fresh error (or NULL)."""
  callback = _on_ready_functions.get(function)
  if callback is None:
    callback = _on_ready_functions.setdefault(function, _ON_READY(function))
  callback(error_of(status), user_arg)


# Callback address -> its ctypes function object (a caller such as jaxlib
# passes the same few functions again and again).
_on_ready_functions: dict[int, Any] = {}
