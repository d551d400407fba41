"""Tests of multiprocess.py: the topology exchange of a client of several
processes, simulated by clients of one process on threads that share an
in-memory key-value store (as jax.distributed's store is shared)."""

import threading

import numpy as np
import pytest

import pjrt
import support
from pjrt._src.plugin import backends
from pjrt._src.plugin import multiprocess
from pjrt._src.plugin import testing

STRIDE = multiprocess.DEVICE_ID_STRIDE


def _on_threads(fn, n):
  """fn(i) for i in range(n), each on its own thread; results by i (a
  raised exception is returned, not raised)."""
  results = [None] * n

  def body(i):
    try:
      results[i] = fn(i)
    except BaseException as e:  # pylint: disable=broad-except
      results[i] = e

  threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(60)
  assert not any(t.is_alive() for t in threads)
  return results


def test_process_info_round_trip():
  info = multiprocess.ProcessInfo(1, 3, "cpu", 1)
  assert multiprocess.ProcessInfo.decode(info.encode(), "x") == info


@pytest.mark.parametrize("data", [b"", b"{}", b"\xff", b'{"format": 7}',
                                  b'{"format": 1, "process_index": 0, '
                                  b'"num_devices": 0, "backend": "cpu"}'])
def test_foreign_descriptions_are_data_loss(data):
  with pytest.raises(support.DataLossError, match="the value of 'k'"):
    multiprocess.ProcessInfo.decode(data, "the value of 'k'")


def test_launcher_rank():
  assert multiprocess.launcher_rank({}) is None
  assert multiprocess.launcher_rank({"OMPI_COMM_WORLD_RANK": "3"}) == 3
  assert multiprocess.launcher_rank({"PMI_RANK": "1"}) == 1
  assert multiprocess.launcher_rank({"PMIX_RANK": "x"}) is None


def test_global_device_ids_follow_xla():
  assert multiprocess.global_device_id(0, 3) == 3
  assert multiprocess.global_device_id(2, 1) == 2 * 131072 + 1


def test_exchange_lists_every_process_in_order():
  store = multiprocess.MemoryStore()
  infos = [multiprocess.ProcessInfo(p, p + 1, "cpu", None) for p in range(3)]
  got = _on_threads(lambda p: multiprocess.exchange_topology(
      store, infos[p], 3, timeout_s=30), 3)
  assert got == [infos] * 3
  assert len(store.keys()) == 3


def test_a_missing_process_is_deadline_exceeded_naming_it():
  store = multiprocess.MemoryStore()
  own = multiprocess.ProcessInfo(0, 1, "cpu")
  with pytest.raises(support.DeadlineExceededError,
                     match="for the devices of process 1 of 2"):
    multiprocess.exchange_topology(store, own, 2, timeout_s=0.2)


def test_processes_with_different_backends_are_refused():
  store = multiprocess.MemoryStore()
  got = _on_threads(lambda p: multiprocess.exchange_topology(
      store, multiprocess.ProcessInfo(p, 1, ("cpu", "interpreter")[p]), 2,
      timeout_s=30), 2)
  for e in got:
    assert isinstance(e, support.FailedPreconditionError)
    assert "process 1: interpreter" in str(e)


# -- Through PJRT_Client_Create's key-value callbacks. -------------------------


def _make_clients(store, num_devices=(2, 2), backend="interpreter",
                  **options):
  n = len(num_devices)

  def make(p):
    return pjrt.Client(testing.plugin(), {
        "backend": backend, "num_devices": num_devices[p], "node_id": p,
        "num_nodes": n, **options}, kv_store=store)

  got = _on_threads(make, n)
  for c in got:
    if isinstance(c, BaseException):
      raise c
  return got


@pytest.fixture(name="clients")
def _two_clients():
  clients = _make_clients(multiprocess.MemoryStore(), num_devices=(2, 3))
  yield clients
  for c in clients:
    c.close()


def test_every_process_lists_every_device(clients):
  want = [(0, 0), (1, 0), (STRIDE, 1), (STRIDE + 1, 1), (STRIDE + 2, 1)]
  for p, c in enumerate(clients):
    assert c.process_index == p
    assert [(d.id, d.process_index) for d in c.devices()] == want
    local = c.addressable_devices()
    assert [d.id for d in local] == [i for i, q in want if q == p]
    assert [d.local_hardware_id for d in local] == list(range(len(local)))
    assert [d.is_addressable for d in c.devices()] == [
        q == p for _, q in want]
    owners = sorted(m.addressable_by_devices()[0].id for m in c.memories())
    assert owners == [d.id for d in local for _ in range(3)]


def test_lookup_and_remote_devices(clients):
  c0, c1 = clients
  remote = c0.lookup_device(STRIDE + 2)
  assert remote.process_index == 1 and not remote.is_addressable
  assert remote.memories() == []
  with pytest.raises(support.InvalidArgumentError,
                     match="belongs to process 1; it is not addressable"):
    remote.default_memory()
  with pytest.raises(support.InvalidArgumentError,
                     match="belongs to process 1"):
    c0.buffer_from_numpy(np.ones(2, np.float32), remote)
  with pytest.raises(support.InvalidArgumentError, match="no device with id"):
    c0.lookup_device(2)
  assert c1.lookup_addressable_device(2).id == STRIDE + 2
  assert "process_index=1" in c0.lookup_device(STRIDE).debug_string


def test_each_process_runs_on_its_own_devices(clients):
  for p, c in enumerate(clients):
    exe = c.compile(testing.ADD_F32)
    assert [d.id for d in exe.addressable_devices()] == [p * STRIDE]
    x = c.buffer_from_numpy(np.arange(4, dtype=np.float32))
    (y,) = exe.execute([x, x])
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(4))


def test_a_program_spanning_processes_runs_local_instances(clients):
  # Two replicas, one device in each process, no collectives: each process
  # runs its own instance with its own argument list.
  options = pjrt.compile_options(num_replicas=2,
                                 device_assignment=[[1], [STRIDE]])
  for p, c in enumerate(clients):
    exe = c.compile(testing.ADD_F32, compile_options=options)
    local = exe.addressable_devices()
    assert [d.process_index for d in local] == [p]
    x = c.buffer_from_numpy(np.full(4, p + 1, np.float32), local[0])
    ((y,),) = exe.execute_sharded([[x, x]])
    np.testing.assert_array_equal(y.to_numpy(), np.full(4, 2 * (p + 1)))


def test_a_missing_process_fails_client_creation():
  with pytest.raises(support.DeadlineExceededError,
                     match="process 0 waited 0.3 s for the devices of "
                     "process 1 of 2"):
    pjrt.Client(testing.plugin(), {"num_nodes": 2, "node_id": 0,
                                   "topology_timeout_s": 0.3},
                kv_store=multiprocess.MemoryStore())


def test_several_processes_need_the_store():
  with pytest.raises(support.InvalidArgumentError,
                     match="needs the key-value store callbacks"):
    pjrt.Client(testing.plugin(), {"num_nodes": 2, "node_id": 1})


def test_store_errors_keep_their_code():
  class Broken:
    def put(self, key, value):
      raise support.UnavailableError("coordinator gone")

    def get(self, key, timeout_s):
      raise AssertionError("not reached")

  with pytest.raises(support.UnavailableError,
                     match="key-value put of 'topology/.*coordinator gone"):
    pjrt.Client(testing.plugin(), {"num_nodes": 2, "node_id": 0},
                kv_store=Broken())


@pytest.mark.parametrize("backend,error,match", [
    ("cpu", support.FailedPreconditionError,
     r"process\(es\) \[0, 1\] were not started by an MPI launcher"),
    ("interpreter", support.UnimplementedError,
     "'interpreter' backend does not run"),
])
def test_collectives_between_processes_need_mpi_and_the_cpu_backend(
    backend, error, match, monkeypatch):
  if backend == "cpu" and backends.cpu_compiler_module() is None:
    pytest.skip("the cpu backend is not available")
  for name in multiprocess.RANK_ENVS:
    monkeypatch.delenv(name, raising=False)
  clients = _make_clients(multiprocess.MemoryStore(), num_devices=(1, 1),
                          backend=backend)
  try:
    options = pjrt.compile_options(num_replicas=2,
                                   device_assignment=[[0], [STRIDE]])
    for p, c in enumerate(clients):
      exe = c.compile(testing.ALL_REDUCE_2.replace("3xf32", "4xf32"),
                      compile_options=options)
      x = c.buffer_from_numpy(np.ones(4, np.float32),
                              exe.addressable_devices()[0])
      with pytest.raises(error, match=match):
        exe.execute_sharded([[x]])
  finally:
    for c in clients:
      c.close()
