"""Conformance: several clients at once, and threads sharing one client."""

import concurrent.futures

import numpy as np
import pytest

import pjrt
import support
from pjrt.cts import programs

_THREADS = 4
_EXECUTES_PER_THREAD = 20

# Codes a plugin may use to refuse a second client of devices it owns.
_EXCLUSIVE_CODES = {support.StatusCode.FAILED_PRECONDITION,
                    support.StatusCode.RESOURCE_EXHAUSTED,
                    support.StatusCode.UNAVAILABLE,
                    support.StatusCode.ALREADY_EXISTS}


def _another_client(plugin) -> pjrt.Client:
  try:
    return pjrt.Client(plugin)
  except support.XlaError as e:
    if support.StatusCode(e.code) in _EXCLUSIVE_CODES:
      pytest.skip(f"the plugin allows one client at a time: {e}")
    raise


def test_several_clients_at_once(plugin, client):
  others = [_another_client(plugin) for _ in range(2)]
  try:
    everyone = [client] + others
    assert len({c.handle for c in everyone}) == len(everyone)
    results = []
    for i, c in enumerate(everyone):
      assert len(c.devices()) == len(client.devices())
      x = c.buffer_from_numpy(np.full(4, i, np.float32))
      (out,) = c.compile(programs.ADD_F32).execute([x, x])
      results.append(out)
    for i, out in enumerate(results):
      np.testing.assert_array_equal(out.to_numpy(), np.full(4, 2 * i))
  finally:
    for c in others:
      c.close()


def test_closing_one_client_leaves_the_others(plugin, client):
  other = _another_client(plugin)
  kept = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
  gone = other.buffer_from_numpy(np.arange(4, dtype=np.float32))
  other.close()
  assert "destroyed" in repr(gone)
  np.testing.assert_array_equal(kept.to_numpy(), np.arange(4))
  (out,) = client.compile(programs.ADD_F32).execute([kept, kept])
  np.testing.assert_array_equal(out.to_numpy(), 2 * np.arange(4))


def test_threads_execute_concurrently(client):
  executable = client.compile(programs.ADD_F32)

  def work(thread: int) -> list[str]:
    problems = []
    for i in range(_EXECUTES_PER_THREAD):
      a = np.arange(4, dtype=np.float32) + 100 * thread + i
      x = client.buffer_from_numpy(a)
      (out,) = executable.execute([x, x])
      got = out.to_numpy()
      if not np.array_equal(got, a + a):
        problems.append(f"thread {thread} run {i}: {got} != {a + a}")
    return problems

  with concurrent.futures.ThreadPoolExecutor(_THREADS) as pool:
    problems = [p for ps in pool.map(work, range(_THREADS)) for p in ps]
  assert not problems, problems


def test_threads_on_different_devices(client):
  devices = client.addressable_devices()[:_THREADS]

  def work(device) -> bool:
    options = pjrt.compile_options(device_assignment=[[device.id]])
    executable = client.compile(programs.DOT_F32, compile_options=options)
    rng = np.random.default_rng(device.id)
    for _ in range(5):
      a = rng.standard_normal((2, 3)).astype(np.float32)
      b = rng.standard_normal((3, 4)).astype(np.float32)
      (out,) = executable.execute([client.buffer_from_numpy(a, device),
                                   client.buffer_from_numpy(b, device)])
      np.testing.assert_allclose(out.to_numpy(), a @ b, rtol=1e-5, atol=1e-6)
    return True

  with concurrent.futures.ThreadPoolExecutor(len(devices)) as pool:
    assert all(pool.map(work, devices))


def test_threads_compile_concurrently(client):
  sources = [programs.ADD_F32, programs.DOT_F32, programs.REDUCE_SUM_F32,
             programs.CONSTANT_ONLY] * 2
  with concurrent.futures.ThreadPoolExecutor(_THREADS) as pool:
    executables = list(pool.map(client.compile, sources))
  assert [e.num_outputs for e in executables] == [1] * len(sources)


def test_threads_transfer_concurrently(client):
  def work(seed: int) -> bool:
    rng = np.random.default_rng(seed)
    for _ in range(10):
      a = rng.standard_normal((16, 8)).astype(np.float64)
      if not np.array_equal(client.buffer_from_numpy(a).to_numpy(), a):
        return False
    return True

  with concurrent.futures.ThreadPoolExecutor(_THREADS) as pool:
    assert all(pool.map(work, range(_THREADS)))
