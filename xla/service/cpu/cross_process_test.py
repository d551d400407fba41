"""Tests of cross_process.py: collectives between participants placed in
several processes, simulated in this one (each simulated process has its
own CollectiveExecution and reaches the others through a LocalHub), checked
against the same program run in one process."""

import threading

import ml_dtypes
import numpy as np
import pytest

import support
from xla.service.cpu import collectives
from xla.service.cpu import cpu_testing
from xla.service.cpu import cross_process

_COMPUTATIONS = """
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
isum {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
fmax {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
bsum {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
sum_times_one {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  one = f32[] constant(1)
  ROOT p = f32[] multiply(s, one)
}
"""


def _module(body, params="x = f32[8] parameter(0)", replicas=1,
            partitions=4):
  header = "HloModule m"
  if replicas > 1:
    header += f", replica_count={replicas}"
  if partitions > 1:
    header += f", num_partitions={partitions}"
  return f"{header}\n{_COMPUTATIONS}\nENTRY e {{\n  {params}\n  {body}\n}}\n"


def run_in_processes(exe, argument_lists, placement, hub=None,
                     timeout_s=30.0, custom_calls=None, absent=()):
  """Runs every participant's instance, participant f in simulated process
  placement[f]; returns [(results or the exception)] by flattened id.
  Processes in `absent` never run."""
  hub = hub or cross_process.LocalHub()
  replicas, partitions = exe.participants
  n = replicas * partitions
  results = [None] * n
  threads = []
  for q in sorted(set(placement)):
    if q in absent:
      continue
    execution = collectives.CollectiveExecution(replicas, partitions)
    execution.span_processes(placement, q,
                             transport=_transport(hub, q),
                             timeout_s=timeout_s)
    local = [f for f in range(n) if placement[f] == q]
    pids = {f: (f // partitions, f % partitions) for f in local}
    for f in local:
      execution.start(pids[f])

    def body(f, execution=execution, pids=pids):
      try:
        results[f] = exe.execute(argument_lists[f], custom_calls=custom_calls,
                                 participant=execution.process(pids[f]))
      except BaseException as e:  # pylint: disable=broad-except
        results[f] = e
        execution.abort(pids[f], e)
      else:
        execution.finish(pids[f])

    threads += [threading.Thread(target=body, args=(f,)) for f in local]
  for t in threads:
    t.start()
  for t in threads:
    t.join(120)
  assert not any(t.is_alive() for t in threads)
  return results


_TRANSPORTS: dict = {}


def _transport(hub, q):
  """One transport per simulated process and hub (its streams persist)."""
  key = (id(hub), q)
  if key not in _TRANSPORTS:
    _TRANSPORTS[key] = (hub, cross_process.LocalTransport(hub, q))
  return _TRANSPORTS[key][1]


def _inputs(n, shape=(8,), dtype=np.float32, seed=0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return [rng.integers(-50, 50, shape).astype(dtype) for _ in range(n)]
  if np.dtype(dtype).kind == "b":
    return [rng.random(shape) < 0.5 for _ in range(n)]
  return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def _check_against_one_process(text, argument_lists, placement, exact=True,
                               rtol=1e-5, **kw):
  """Runs across processes and in one; equal values, or close ones where
  the reduction order differs (not `exact`)."""
  _, exe = cpu_testing.compile_text(text)
  want = exe.execute_spmd(argument_lists)
  got = run_in_processes(exe, argument_lists, placement, **kw)
  for f, (g, w) in enumerate(zip(got, want)):
    assert not isinstance(g, BaseException), (f, g)
    assert len(g) == len(w)
    for a, b in zip(g, w):
      assert a.dtype == b.dtype and a.shape == b.shape
      if exact:
        np.testing.assert_array_equal(a, b, err_msg=f"participant {f}")
      else:
        np.testing.assert_allclose(a.astype(np.float64),
                                   b.astype(np.float64), rtol=rtol,
                                   atol=rtol / 10, err_msg=f"participant {f}")
  return got


# Two processes of two participants; three processes of uneven sizes;
# participants interleaved over the processes.
PLACEMENTS = [(0, 0, 1, 1), (0, 1, 1, 2), (1, 0, 1, 0)]


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("native", [True, False])
def test_all_reduce(placement, native):
  text = _module("""a = f32[8] all-reduce(x), channel_id=1,
    replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=sum
  b = f32[8] all-reduce(x), channel_id=2, replica_groups={{0,2},{1,3}},
    use_global_device_ids=true, to_apply=sum
  c = s32[3] all-reduce(y), channel_id=3, replica_groups={{0,1},{2,3}},
    use_global_device_ids=true, to_apply=isum
  ROOT t = (f32[8], f32[8], s32[3]) tuple(a, b, c)""",
                 params="x = f32[8] parameter(0)\n  y = s32[3] parameter(1)")
  xs = _inputs(4)
  ys = _inputs(4, (3,), np.int32)
  got = _check_against_one_process(
      text, [[x, y] for x, y in zip(xs, ys)], placement, exact=False,
      hub=cross_process.LocalHub(reduce_natively=native))
  # Every participant of a group holds bit-identical values.
  assert len({r[0].tobytes() for r in got}) == 1
  assert got[0][1].tobytes() == got[2][1].tobytes()


@pytest.mark.parametrize("reducer,dtype", [
    ("fmax", np.float32), ("bsum", ml_dtypes.bfloat16),
    ("sum_times_one", np.float32)])
def test_all_reduce_without_a_native_reduction(reducer, dtype):
  # Maximum of floats, bf16 and a computation numpy has no ufunc for (a
  # native combiner) go through the exchange, reduced in process order.
  ty = "bf16" if dtype == ml_dtypes.bfloat16 else "f32"
  text = _module(f"ROOT a = {ty}[5] all-reduce(x), channel_id=1, "
                 "replica_groups={{0,1,2,3}}, use_global_device_ids=true, "
                 f"to_apply={reducer}", params=f"x = {ty}[5] parameter(0)")
  xs = [x.astype(dtype) for x in _inputs(4, (5,))]
  # Each process reduces its own participants first: bf16 rounds
  # differently from the one-process order.
  got = _check_against_one_process(
      text, [[x] for x in xs], (0, 0, 1, 1), exact=reducer == "fmax",
      rtol=2e-2 if dtype == ml_dtypes.bfloat16 else 1e-5)
  # Both processes reduced the same partials in the same order.
  assert len({r[0].tobytes() for r in got}) == 1


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_all_gather(placement):
  text = _module("""ROOT ag = (f32[2,16], s32[3,4]) all-gather(x, y),
    channel_id=1, replica_groups={{0,3,1,2}}, dimensions={1},
    use_global_device_ids=true""",
                 params="x = f32[2,4] parameter(0)\n  y = s32[3,1] "
                 "parameter(1)")
  xs = _inputs(4, (2, 4))
  ys = [np.full((3, 1), i, np.int32) for i in range(4)]
  _check_against_one_process(text, [[x, y] for x, y in zip(xs, ys)],
                             placement)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_reduce_scatter(placement):
  text = _module("ROOT rs = f32[4,2] reduce-scatter(x), channel_id=1, "
                 "replica_groups={{0,1,2,3}}, dimensions={1}, "
                 "use_global_device_ids=true, to_apply=sum",
                 params="x = f32[4,8] parameter(0)")
  xs = _inputs(4, (4, 8))
  _check_against_one_process(text, [[x] for x in xs], placement, exact=False)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_all_to_all(placement):
  text = _module("ROOT a = f32[4,8] all-to-all(x), channel_id=1, "
                 "replica_groups={{0,1,2,3}}, dimensions={1}",
                 params="x = f32[4,8] parameter(0)")
  xs = _inputs(4, (4, 8))
  _check_against_one_process(text, [[x] for x in xs], placement)
  text = _module("ROOT a = (s32[3], s32[3]) all-to-all(x, y), "
                 "replica_groups={{1,0},{3,2}}",
                 params="x = s32[3] parameter(0)\n  y = s32[3] parameter(1)",
                 replicas=4, partitions=1)
  args = [[np.full(3, 10 * r + k, np.int32) for k in range(2)]
          for r in range(4)]
  _check_against_one_process(text, args, placement)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_collective_permute_and_broadcast(placement):
  text = _module("""p = f32[2,2] collective-permute(x), channel_id=1,
    source_target_pairs={{0,2},{2,1},{1,0}}
  b = f32[2,2] collective-broadcast(x), channel_id=2,
    replica_groups={{2,0},{1,3}}
  ROOT t = (f32[2,2], f32[2,2]) tuple(p, b)""",
                 params="x = f32[2,2] parameter(0)")
  xs = [np.full((2, 2), i + 1, np.float32) for i in range(4)]
  got = _check_against_one_process(text, [[x] for x in xs], placement)
  np.testing.assert_array_equal(got[3][0], np.zeros((2, 2)))


def test_collectives_in_a_loop_and_local_groups():
  # A loop of all-reduces across processes, and one whose groups are
  # each inside one process (run as in one process).
  text = _module("""zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  v = f32[8] get-tuple-element(w), index=1
  ROOT l = f32[8] all-reduce(v), channel_id=2, replica_groups={{0,1},{2,3}},
    use_global_device_ids=true, to_apply=sum""")
  text = text.replace("ENTRY e", """cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v = f32[8] get-tuple-element(s), index=1
  r = f32[8] all-reduce(v), channel_id=1, replica_groups={{0,1,2,3}},
    use_global_device_ids=true, to_apply=sum
  ROOT t = (s32[], f32[8]) tuple(j, r)
}
ENTRY e""")
  xs = [np.full(8, i, np.float32) for i in range(4)]
  got = _check_against_one_process(text, [[x] for x in xs], (0, 0, 1, 1))
  np.testing.assert_array_equal(got[0][0], np.full(8, 2 * 6 * 4 ** 2))


def test_executions_run_in_launch_order_per_stream():
  _, exe = cpu_testing.compile_text(_module(
      "ROOT a = f32[8] all-reduce(x), channel_id=1, "
      "replica_groups={{0,1,2,3}}, use_global_device_ids=true, "
      "to_apply=sum"))
  hub = cross_process.LocalHub(reduce_natively=False)
  for k in range(3):
    xs = [np.full(8, k + i, np.float32) for i in range(4)]
    got = run_in_processes(exe, [[x] for x in xs], (0, 0, 1, 1), hub=hub)
    np.testing.assert_array_equal(got[1][0], np.full(8, 4 * k + 6))


def test_an_absent_process_is_deadline_exceeded_and_breaks_the_stream():
  _, exe = cpu_testing.compile_text(_module(
      "ROOT a = f32[8] all-reduce(x), channel_id=1, "
      "replica_groups={{0,1,2,3}}, use_global_device_ids=true, "
      "to_apply=sum"))
  hub = cross_process.LocalHub(reduce_natively=False)
  xs = [[np.ones(8, np.float32)] for _ in range(4)]
  got = run_in_processes(exe, xs, (0, 0, 1, 1), hub=hub, timeout_s=0.3,
                         absent=(1,))
  errors = got[:2]
  assert all(isinstance(e, support.XlaError) for e in errors), errors
  deadline = [e for e in errors
              if isinstance(e, support.DeadlineExceededError)]
  assert deadline and "process 1" in str(deadline[0])
  assert "across processes [0, 1] (process 0)" in str(deadline[0])
  # Its messages may still be in flight: the next execution over these
  # processes fails at once, rather than pairing with them.
  execution = collectives.CollectiveExecution(1, 4)
  with pytest.raises(support.FailedPreconditionError,
                     match="an earlier execution over these processes "
                     "failed"):
    execution.span_processes((0, 0, 1, 1), 0, transport=_transport(hub, 0))


def test_a_failing_participant_cancels_its_process():
  text = _module("""c = f32[8] custom-call(x), custom_call_target="check"
  ROOT ar = f32[8] all-reduce(c), channel_id=1, replica_groups={{0,1,2,3}},
    use_global_device_ids=true, to_apply=sum""")
  _, exe = cpu_testing.compile_text(text)

  def check(instr, operands):
    del instr
    if operands[0][0] < 0:
      raise support.DataLossError("participant 1's input is bad")
    return operands[0]

  xs = [[np.full(8, -1 if i == 1 else 1, np.float32)] for i in range(4)]
  got = run_in_processes(exe, xs, (0, 0, 1, 1), timeout_s=0.5,
                         custom_calls={"check": check})
  assert isinstance(got[1], support.DataLossError)
  assert isinstance(got[0], support.CancelledError)
  assert "participant 1" in str(got[0])
  # Process 1 waited for process 0 until its timeout.
  assert all(isinstance(e, (support.DeadlineExceededError,
                            support.CancelledError)) for e in got[2:])


def test_placements_are_checked():
  execution = collectives.CollectiveExecution(1, 4)
  hub = cross_process.LocalHub()
  with pytest.raises(support.InvalidArgumentError, match="3 processes for 4"):
    execution.span_processes((0, 1, 1), 0, transport=_transport(hub, 0))
  with pytest.raises(support.InvalidArgumentError, match="runs none"):
    execution.span_processes((0, 0, 1, 1), 2, transport=_transport(hub, 2))


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("alias", [False, True])
def test_all_reduce_thunk_on_buffers_that_alias(native, alias):
  # One all-reduce thunk whose results are (alias) or are not its
  # operands' buffers, two participants per process: the partial is
  # folded into the first result, the reduction across processes received
  # into the second where that is no unread operand.
  from xla.service.cpu import thunk as thunk_lib  # pylint: disable=g-import-not-at-top
  n, size, placement = 4, 3000, (0, 0, 1, 1)
  hub = cross_process.LocalHub(reduce_natively=native)
  spec_in = thunk_lib.LeafSpec(0, np.dtype(np.float32), (size,))
  spec_out = thunk_lib.LeafSpec(1, np.dtype(np.float32), (size,))
  thunk = collectives.CollectiveThunk(
      "ar", "all-reduce", {"groups": [[0, 1, 2, 3]], "reduce": "add"},
      [spec_in], [spec_out])
  xs = [x.astype(np.float32) for x in _inputs(n, (size,), np.int32)]
  ins = [x.copy() for x in xs]
  outs = ins if alias else [np.zeros(size, np.float32) for _ in range(n)]
  threads = []
  for q in (0, 1):
    execution = collectives.CollectiveExecution(1, n)
    execution.span_processes(placement, q, transport=_transport(hub, q),
                             timeout_s=30.0)
    local = [f for f in range(n) if placement[f] == q]
    for f in local:
      execution.start((0, f))

    def body(f, execution=execution):
      p = execution.process((0, f))
      table = np.array([ins[f].__array_interface__["data"][0],
                        outs[f].__array_interface__["data"][0]], np.uint64)
      try:
        thunk.run(collectives.ParticipantState(table, None, None, p))
      except BaseException as e:  # pylint: disable=broad-except
        execution.abort((0, f), e)
        raise
      execution.finish((0, f))

    threads += [threading.Thread(target=body, args=(f,)) for f in local]
  for t in threads:
    t.start()
  for t in threads:
    t.join(60)
  want = (xs[0] + xs[1]) + (xs[2] + xs[3])
  for f in range(n):
    np.testing.assert_array_equal(outs[f], want, err_msg=f"participant {f}")
