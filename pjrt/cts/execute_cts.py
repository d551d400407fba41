"""Conformance: executing programs, numeric results against numpy."""

import numpy as np
import pytest

import pjrt
from pjrt.cts import harness
from pjrt.cts import programs


def _run(client, program, *arrays, device=None):
  options = None
  if device is not None:
    options = pjrt.compile_options(device_assignment=[[device.id]])
  executable = client.compile(program, compile_options=options)
  inputs = [client.buffer_from_numpy(a, device) for a in arrays]
  outputs = executable.execute(inputs)
  return [o.to_numpy() for o in outputs]


def test_add(client):
  a = np.array([1.5, -2, 3, 1e6], np.float32)
  b = np.array([0.25, 2, -7, 1], np.float32)
  (out,) = _run(client, programs.ADD_F32, a, b)
  assert out.dtype == np.float32
  np.testing.assert_array_equal(out, a + b)


def test_dot(client):
  rng = np.random.default_rng(0)
  a = rng.standard_normal((2, 3)).astype(np.float32)
  b = rng.standard_normal((3, 4)).astype(np.float32)
  (out,) = _run(client, programs.DOT_F32, a, b)
  assert out.shape == (2, 4)
  np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-6)


def test_reduce(client):
  a = np.arange(15, dtype=np.float32).reshape(3, 5) - 4
  (out,) = _run(client, programs.REDUCE_SUM_F32, a)
  np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-6)


def test_two_outputs(client):
  a = np.arange(6, dtype=np.int32).reshape(2, 3) - 2
  squares, constant = _run(client, programs.MULTIPLY_I32_AND_CONSTANT, a)
  np.testing.assert_array_equal(squares, a * a)
  assert constant.dtype == np.float64 and constant.shape == ()
  assert constant == 2.5


def test_no_parameters(client):
  (out,) = _run(client, programs.CONSTANT_ONLY)
  np.testing.assert_array_equal(out, np.array([7, -7], np.int32))


def test_execute_on_every_device(client):
  for device in client.addressable_devices():
    a = np.full(4, device.id, np.float32)
    executable = client.compile(
        programs.ADD_F32,
        compile_options=pjrt.compile_options(device_assignment=[[device.id]]))
    x = client.buffer_from_numpy(a, device)
    (out,) = executable.execute([x, x])
    assert out.device == device
    np.testing.assert_array_equal(out.to_numpy(), a + a)


def test_execute_repeatedly_keeps_inputs(client):
  executable = client.compile(programs.ADD_F32)
  a = np.array([1, 2, 3, 4], np.float32)
  x = client.buffer_from_numpy(a)
  for _ in range(5):
    (out,) = executable.execute([x, x])
    np.testing.assert_array_equal(out.to_numpy(), a + a)
  assert not x.is_deleted
  np.testing.assert_array_equal(x.to_numpy(), a)


def test_output_is_input_of_next_execute(client):
  executable = client.compile(programs.ADD_F32)
  x = client.buffer_from_numpy(np.ones(4, np.float32))
  for _ in range(4):
    (x,) = executable.execute([x, x])
  np.testing.assert_array_equal(x.to_numpy(), np.full(4, 16, np.float32))


def test_output_ready_event(client):
  executable = client.compile(programs.ADD_F32)
  x = client.buffer_from_numpy(np.ones(4, np.float32))
  (out,) = executable.execute([x, x])
  event = out.ready()
  event.wait()
  assert event.is_ready() and event.error() is None
  event.close()


def test_execute_replicated(client):
  devices = client.addressable_devices()[:2]
  if len(devices) < 2:
    pytest.skip("needs two addressable devices")
  options = pjrt.compile_options(
      num_replicas=2, device_assignment=[[d.id] for d in devices])
  executable = client.compile(programs.ADD_F32, compile_options=options)
  inputs = [client.buffer_from_numpy(np.full(4, i + 1, np.float32), d)
            for i, d in enumerate(devices)]
  outputs = executable.execute_sharded([[x, x] for x in inputs])
  assert [o[0].device for o in outputs] == devices
  for i, (out,) in enumerate(outputs):
    np.testing.assert_array_equal(out.to_numpy(), np.full(4, 2 * (i + 1)))


@pytest.mark.parametrize("name", [
    "execute.too_few_arguments",
    "execute.too_many_arguments",
    "execute.no_arguments",
    "execute.wrong_shape",
    "execute.wrong_rank",
    "execute.wrong_dtype",
], ids=harness.probe_id)
def test_wrong_arguments_are_an_error(probe, name):
  harness.expect_error(probe(name), harness.BAD_INPUT_CODES)


@pytest.mark.parametrize("name", [
    "execute.argument_on_other_device",
    "execute.argument_of_other_client",
], ids=harness.probe_id)
def test_foreign_argument_is_an_error_or_copied(probe, name):
  # A plugin may refuse a buffer that lives elsewhere, or copy it over; it
  # must not crash or compute garbage.
  result = probe(name)
  harness.expect_no_crash(result)
  if result.outcome == "ok" and not str(result.value).startswith("skip"):
    assert result.value == [2.0] * 4, result.describe()
