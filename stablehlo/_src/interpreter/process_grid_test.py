"""Tests for the process grid: the spec's process-group strategies, the
rendezvous and mailboxes, and that nothing hangs (deadlock detection,
abort, timeouts)."""

import threading
import time

import pytest

from stablehlo._src.interpreter import process_grid as pg
import support

P = pg.ProcessId


def _ids(groups):
  return [[tuple(p) for p in g] for g in groups]


def test_cross_replica_matches_spec_example():
  # spec "cross_replica": replica_groups [[0, 1], [2, 3]], num_partitions 2.
  grid = pg.ProcessGrid(4, 2)
  assert _ids(grid.cross_replica([[0, 1], [2, 3]])) == [
      [(0, 0), (1, 0)], [(0, 1), (1, 1)], [(2, 0), (3, 0)],
      [(2, 1), (3, 1)]]


def test_cross_partition_matches_spec_example():
  # spec "cross_partition": partition_groups [[0, 1]], num_replicas 4.
  grid = pg.ProcessGrid(4, 2)
  assert _ids(grid.cross_partition([[0, 1]])) == [
      [(0, 0), (0, 1)], [(1, 0), (1, 1)], [(2, 0), (2, 1)],
      [(3, 0), (3, 1)]]


def test_cross_replica_and_partition_matches_spec_example():
  grid = pg.ProcessGrid(4, 2)
  assert _ids(grid.cross_replica_and_partition([[0, 1], [2, 3]])) == [
      [(0, 0), (1, 0), (0, 1), (1, 1)], [(2, 0), (3, 0), (2, 1), (3, 1)]]


def test_flattened_ids_matches_spec_example():
  grid = pg.ProcessGrid(4, 2)
  assert _ids(grid.flattened_ids([[0, 1, 2, 3], [4, 5, 6, 7]])) == [
      [(0, 0), (0, 1), (1, 0), (1, 1)], [(2, 0), (2, 1), (3, 0), (3, 1)]]


def test_empty_groups_mean_all_ids():
  grid = pg.ProcessGrid(3, 1)
  assert _ids(grid.cross_replica([])) == [[(0, 0), (1, 0), (2, 0)]]


def test_ids_out_of_range_are_rejected():
  grid = pg.ProcessGrid(2, 1)
  with pytest.raises(support.InvalidArgumentError, match="out of range"):
    grid.cross_replica([[0, 2]])
  with pytest.raises(support.InvalidArgumentError, match="out of range"):
    grid.flattened_ids([[0, 5]])


def test_process_ids_are_replica_major():
  assert pg.ProcessGrid(2, 3).process_ids() == [
      P(0, 0), P(0, 1), P(0, 2), P(1, 0), P(1, 1), P(1, 2)]


def _run_all(grid, fn):
  """Runs fn(pid) in one thread per process; returns ({pid: result},
  {pid: error})."""
  results, errors = {}, {}

  def body(pid):
    try:
      results[pid] = fn(pid)
    except BaseException as e:  # pylint: disable=broad-except
      errors[pid] = e
      grid.abort(pid, e)
    finally:
      grid.finish(pid)

  pids = grid.process_ids()
  for pid in pids:
    grid.start(pid)
  threads = [threading.Thread(target=body, args=(p,), daemon=True)
             for p in pids]
  for th in threads:
    th.start()
  for th in threads:
    th.join(30)
    assert not th.is_alive(), "a process thread hung"
  return results, errors


def test_rendezvous_exchanges_values():
  grid = pg.ProcessGrid(4, 1)
  group = grid.process_ids()
  results, errors = _run_all(
      grid, lambda pid: grid.rendezvous(pid, "k", 0, group,
                                        pid.replica_id * 10))
  assert not errors
  for pid in group:
    assert results[pid] == {p: p.replica_id * 10 for p in group}


def test_repeated_rendezvous_on_one_key_do_not_mix():
  grid = pg.ProcessGrid(3, 1)
  group = grid.process_ids()

  def fn(pid):
    seen = []
    for i in range(40):
      got = grid.rendezvous(pid, "k", 0, group, (i, pid.replica_id))
      seen.append(sorted(got.values()))
    return seen

  results, errors = _run_all(grid, fn)
  assert not errors
  for pid in group:
    assert results[pid] == [[(i, 0), (i, 1), (i, 2)] for i in range(40)]


def test_mailbox_is_fifo():
  grid = pg.ProcessGrid(2, 1)

  def fn(pid):
    if pid.replica_id == 0:
      for i in range(5):
        grid.post("ch", i)
      return None
    return [grid.take(pid, "ch", "test") for _ in range(5)]

  results, errors = _run_all(grid, fn)
  assert not errors
  assert results[P(1, 0)] == [0, 1, 2, 3, 4]


def test_deadlock_is_detected_at_once():
  grid = pg.ProcessGrid(2, 1)
  t0 = time.monotonic()
  _, errors = _run_all(
      grid, lambda pid: grid.take(pid, ("box", pid), f"box of {pid}"))
  assert time.monotonic() - t0 < 10
  assert set(errors) == {P(0, 0), P(1, 0)}
  root = errors[grid.root_pid]
  assert isinstance(root, pg.DeadlockError)
  assert "box of (0, 0)" in str(root) and "box of (1, 0)" in str(root)
  other = errors[P(1, 0) if grid.root_pid == P(0, 0) else P(0, 0)]
  assert isinstance(other, support.CancelledError)


def test_deadlock_when_a_peer_finished_without_joining():
  grid = pg.ProcessGrid(2, 1)
  group = grid.process_ids()

  def fn(pid):
    if pid.replica_id == 1:
      return "done"
    return grid.rendezvous(pid, "all_reduce", 0, group, 1)

  results, errors = _run_all(grid, fn)
  assert results == {P(1, 0): "done"}
  assert isinstance(errors[P(0, 0)], pg.DeadlockError)
  assert "waiting for [(1, 0)]" in str(errors[P(0, 0)])


def test_failure_releases_the_waiting_processes():
  grid = pg.ProcessGrid(3, 1)
  group = grid.process_ids()

  def fn(pid):
    if pid.replica_id == 2:
      time.sleep(0.05)
      raise ValueError("boom")
    return grid.rendezvous(pid, "k", 0, group, 0)

  _, errors = _run_all(grid, fn)
  assert grid.root_pid == P(2, 0)
  assert isinstance(errors[P(2, 0)], ValueError)
  for pid in (P(0, 0), P(1, 0)):
    assert isinstance(errors[pid], support.CancelledError)
    assert "process (2, 0) failed" in str(errors[pid])


def test_barrier_timeout_while_a_peer_is_busy():
  grid = pg.ProcessGrid(2, 1, barrier_timeout_s=0.2)
  group = grid.process_ids()
  release = threading.Event()

  def fn(pid):
    if pid.replica_id == 1:
      release.wait(10)  # busy (not waiting in the grid): no deadlock
      return None
    try:
      return grid.rendezvous(pid, "stablehlo.all_gather", 3, group, 0)
    finally:
      release.set()

  _, errors = _run_all(grid, fn)
  err = errors[P(0, 0)]
  assert isinstance(err, pg.BarrierTimeoutError)
  assert "stablehlo.all_gather" in str(err) and "channel_id 3" in str(err)


def test_deadline_bounds_a_wait():
  grid = pg.ProcessGrid(2, 1, barrier_timeout_s=None)
  pid = P(0, 0)
  grid.start(pid)
  grid.start(P(1, 0))  # "running" forever: no deadlock, only the deadline
  with pytest.raises(support.DeadlineExceededError):
    grid.take(pid, "nothing", "a recv", deadline=time.monotonic() + 0.1)


def test_infeed_and_outfeed():
  grid = pg.ProcessGrid(1, 1, infeed=["a", "b"])
  assert grid.pop_infeed() == "a"
  grid.push_infeed("c")
  assert grid.pop_infeed() == "b"
  assert grid.pop_infeed() == "c"
  with pytest.raises(support.OutOfRangeError, match="infeed is empty"):
    grid.pop_infeed()
  grid.push_outfeed(P(0, 0), [1, 2])
  assert grid.outfeed == [(P(0, 0), (1, 2))]


def test_bad_grid_size():
  with pytest.raises(support.InvalidArgumentError):
    pg.ProcessGrid(0, 1)
