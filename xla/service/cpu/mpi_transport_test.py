"""Tests of mpi_transport.py: what it refuses without MPI, and (where
mpirun and mpi4py are installed) the collectives of cross_process_test's
programs between two MPI processes, run by `mpirun -n 2` on this file."""

import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import support
from xla.service.cpu import collectives
from xla.service.cpu import cpu_testing
from xla.service.cpu import mpi_transport

# Open MPI refuses to run as root without these.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def _transport(process_index, ranks):
  # A fresh one (not the shared instance): the tests change nothing shared.
  return mpi_transport.MpiTransport(process_index, tuple(ranks))


def test_without_mpi4py_it_says_what_to_install(monkeypatch):
  monkeypatch.setattr(mpi_transport, "available", lambda: False)
  with pytest.raises(support.FailedPreconditionError,
                     match="needs mpi4py"):
    _transport(0, (0, 1)).check_usable((0, 1))


def test_processes_without_a_launcher_are_named():
  if not mpi_transport.available():
    pytest.skip("mpi4py is not installed")
  with pytest.raises(support.FailedPreconditionError,
                     match=r"process\(es\) \[1\] were not started by an MPI "
                     "launcher.*mpirun -n N"):
    _transport(0, (0, None)).check_usable((0, 1))
  with pytest.raises(support.FailedPreconditionError,
                     match="MPI ranks \\[0, 0\\]"):
    _transport(0, (0, 0)).check_usable((0, 1))


def test_streams_of_some_processes_have_their_own_tags():
  t = _transport(0, range(40))
  assert t._tag(tuple(range(40)), None) == 1  # pylint: disable=protected-access
  assert t._tag((0, 2), None) == 0b101  # pylint: disable=protected-access
  with pytest.raises(support.UnimplementedError, match="up to process 29"):
    t._tag((0, 31), None)  # pylint: disable=protected-access


def test_a_span_without_mpi_fails_before_anything_runs(monkeypatch):
  monkeypatch.setattr(mpi_transport, "available", lambda: False)
  execution = collectives.CollectiveExecution(1, 2)
  with pytest.raises(support.FailedPreconditionError, match="mpi4py"):
    execution.span_processes((0, 1), 0, mpi_ranks=(0, 1))
  assert execution.cross is None


# -- two MPI processes -------------------------------------------------------------

_PROGRAM = """HloModule m, num_partitions=4
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fmax {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
imax {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] maximum(a, b)
}
ENTRY e {
  x = f32[4,8] parameter(0)
  y = s32[6] parameter(1)
  a = f32[4,8] all-reduce(x), channel_id=1, replica_groups={{0,1,2,3}},
    use_global_device_ids=true, to_apply=sum
  b = f32[4,8] all-reduce(x), channel_id=2, replica_groups={{0,2},{1,3}},
    use_global_device_ids=true, to_apply=fmax
  c = s32[6] all-reduce(y), channel_id=3, replica_groups={{0,3},{2,1}},
    use_global_device_ids=true, to_apply=imax
  g = f32[4,32] all-gather(x), channel_id=4, replica_groups={{0,3,1,2}},
    dimensions={1}, use_global_device_ids=true
  r = f32[4,2] reduce-scatter(x), channel_id=5, replica_groups={{0,1,2,3}},
    dimensions={1}, use_global_device_ids=true, to_apply=sum
  t = f32[4,8] all-to-all(x), channel_id=6, replica_groups={{0,1,2,3}},
    dimensions={1}
  p = s32[6] collective-permute(y), channel_id=7,
    source_target_pairs={{0,2},{2,1},{1,3}}
  k = s32[6] collective-broadcast(y), channel_id=8,
    replica_groups={{2,0},{1,3}}
  ROOT out = (f32[4,8], f32[4,8], s32[6], f32[4,32], f32[4,2], f32[4,8],
    s32[6], s32[6]) tuple(a, b, c, g, r, t, p, k)
}
"""


def _child(scenario: str) -> None:
  """One MPI process of the two (run as `python this_file scenario`)."""
  rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
  _, exe = cpu_testing.compile_text(_PROGRAM)
  rng = np.random.default_rng(7)
  args = [[rng.standard_normal((4, 8)).astype(np.float32),
           rng.integers(-9, 9, 6).astype(np.int32)] for _ in range(4)]
  want = exe.execute_spmd(args)
  # Participants 0 and 3 in process 0, 1 and 2 in process 1 (ranks swapped,
  # so that process index and MPI rank differ).
  placement = (0, 1, 1, 0)
  process = 1 - rank
  ranks = (1, 0)

  def run(timeout_s=60.0):
    execution = collectives.CollectiveExecution(1, 4)
    execution.span_processes(placement, process, mpi_ranks=ranks,
                             timeout_s=timeout_s)
    local = [f for f in range(4) if placement[f] == process]
    for f in local:
      execution.start((0, f))
    results = {}

    def body(f):
      try:
        results[f] = exe.execute(args[f],
                                 participant=execution.process((0, f)))
        execution.finish((0, f))
      except BaseException as e:  # pylint: disable=broad-except
        results[f] = e
        execution.abort((0, f), e)

    threads = [threading.Thread(target=body, args=(f,)) for f in local]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    return results

  if scenario == "collectives":
    for _ in range(3):
      for f, got in run().items():
        assert not isinstance(got, BaseException), got
        for a, b in zip(got, want[f]):
          np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    print(f"process {process}: collectives OK", flush=True)
  elif scenario == "timeout":
    run()
    if process == 0:  # runs once more; process 1 does not come
      start = time.monotonic()
      errors = [e for e in run(timeout_s=1.0).values()
                if isinstance(e, support.XlaError)]
      assert time.monotonic() - start < 30
      assert any(isinstance(e, support.DeadlineExceededError) and
                 "waited" in str(e) and "process(es) [1] (MPI ranks [0])"
                 in str(e) for e in errors), errors
      try:
        run()
        raise AssertionError("a broken stream ran")
      except support.FailedPreconditionError as e:
        assert "an earlier execution over these processes failed" in str(e)
    print(f"process {process}: timeout OK", flush=True)


def _mpirun(scenario: str) -> subprocess.CompletedProcess:
  mpirun = shutil.which("mpirun")
  if mpirun is None:
    pytest.skip("mpirun is not installed (Open MPI: apt-get install "
                "openmpi-bin)")
  if not mpi_transport.available():
    pytest.skip("mpi4py is not installed")
  env = dict(os.environ, **MPI_ENV)
  env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
  return subprocess.run(
      [mpirun, "-n", "2", "--oversubscribe", "-x", "PYTHONPATH",
       sys.executable, os.path.abspath(__file__), scenario],
      env=env, capture_output=True, text=True, timeout=300, check=False)


def test_collectives_between_two_mpi_processes():
  done = _mpirun("collectives")
  assert done.returncode == 0, done.stdout + done.stderr
  for p in (0, 1):
    assert f"process {p}: collectives OK" in done.stdout, (
        done.stdout + done.stderr)


def test_a_process_that_does_not_come_is_deadline_exceeded():
  done = _mpirun("timeout")
  assert done.returncode == 0, done.stdout + done.stderr
  for p in (0, 1):
    assert f"process {p}: timeout OK" in done.stdout, (
        done.stdout + done.stderr)


if __name__ == "__main__":
  _child(sys.argv[1])
