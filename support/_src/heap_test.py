"""Tests of support.heap."""

import gc
import threading

import support


def test_pauses_and_restores():
  assert gc.isenabled()
  with support.heap.gc_paused():
    assert not gc.isenabled()
    with support.heap.gc_paused():
      assert not gc.isenabled()
    assert not gc.isenabled()  # Still inside the outer pause.
  assert gc.isenabled()


def test_leaves_a_disabled_collector_disabled():
  gc.disable()
  try:
    with support.heap.gc_paused():
      pass
    assert not gc.isenabled()
  finally:
    gc.enable()


def test_restores_after_an_exception():
  try:
    with support.heap.gc_paused():
      raise ValueError("boom")
  except ValueError:
    pass
  assert gc.isenabled()


def test_concurrent_pauses_end_with_the_last():
  inside = threading.Event()
  release = threading.Event()

  def hold():
    with support.heap.gc_paused():
      inside.set()
      release.wait(10)

  t = threading.Thread(target=hold)
  t.start()
  inside.wait(10)
  with support.heap.gc_paused():
    pass
  assert not gc.isenabled()  # The other thread's pause goes on.
  release.set()
  t.join(10)
  assert gc.isenabled()
