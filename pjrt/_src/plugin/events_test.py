"""Tests of events.py: futures, callbacks, all_of."""

import threading

import pytest

import support
from pjrt._src.plugin import events


def test_future_completes_once():
  future = events.Future()
  assert not future.is_ready()
  assert future.set()
  assert not future.set((3, "late"))
  assert future.is_ready() and future.wait() is None


def test_error_status_raises_its_class():
  future = events.Future.ready((support.StatusCode.NOT_FOUND, "gone"))
  with pytest.raises(support.NotFoundError, match="gone"):
    future.raise_if_error()


def test_callbacks_run_on_completion_or_at_once():
  future = events.Future()
  seen = []
  future.add_callback(seen.append)
  assert not seen
  worker = threading.Thread(target=future.set, args=((13, "boom"),))
  worker.start()
  worker.join()
  assert seen == [(13, "boom")]
  future.add_callback(seen.append)  # Already complete: runs now.
  assert seen == [(13, "boom"), (13, "boom")]


def test_a_failing_callback_does_not_stop_the_others():
  future = events.Future()
  seen = []
  future.add_callback(lambda status: 1 / 0)
  future.add_callback(seen.append)
  future.set()
  assert seen == [None]


def test_wait_with_timeout():
  with pytest.raises(support.DeadlineExceededError):
    events.Future().wait(timeout=0.01)


def test_all_of_takes_the_first_error():
  parts = [events.Future() for _ in range(3)]
  combined = events.all_of(parts)
  parts[1].set((9, "first"))
  parts[0].set((3, "second"))
  assert not combined.is_ready()
  parts[2].set()
  assert combined.wait() == (9, "first")
  assert events.all_of([]).wait() is None


def test_event_handles_view_a_future():
  future = events.Future()
  first, second = events.new_event(future), events.new_event(future)
  assert events.get(first) is future
  events.destroy(first)
  future.set()
  assert events.get(second).is_ready()
  events.destroy(second)
