"""Tests for support._src.trace."""

import json
import os
import subprocess
import sys
import threading

import pytest

from support._src import flags
from support._src import status
from support._src import trace

_EPS = 1e-3  # Microseconds of float rounding allowed when comparing ends.


@pytest.fixture(autouse=True)
def _no_tracing_leaks():
  if trace.is_enabled():
    trace.stop()
  yield
  if trace.is_enabled():
    trace.stop()


def _spans(data):
  return [e for e in data["traceEvents"] if e["ph"] == "X"]


def _by_name(data):
  return {e["name"]: e for e in _spans(data)}


def _inside(child, parent):
  return (parent["ts"] <= child["ts"] and
          child["ts"] + child["dur"] <= parent["ts"] + parent["dur"] + _EPS)


def test_disabled_records_nothing():
  assert not trace.is_enabled()
  with trace.scope("off", k=1) as s:
    s.set_args(more=2)
  trace.instant("off")
  trace.counter("off", x=1)
  assert trace.current_scope_names() == []
  trace.start()
  data = trace.stop()
  assert _spans(data) == []
  assert all(e["ph"] == "M" for e in data["traceEvents"])


def test_stop_when_off_raises():
  with pytest.raises(status.FailedPreconditionError):
    trace.stop()


def test_nested_scopes_json(tmp_path):
  trace.start()
  with trace.scope("outer", module="m"):
    with trace.scope("inner1") as s:
      assert trace.current_scope_names() == ["outer", "inner1"]
      s.set_args(ops=3)
    with trace.scope("inner2"):
      with trace.scope("leaf"):
        pass
  path = tmp_path / "sub" / "trace.json"
  returned = trace.stop(path)
  data = json.loads(path.read_text())
  assert data == returned
  spans = _by_name(data)
  assert set(spans) == {"outer", "inner1", "inner2", "leaf"}
  pid, tid = os.getpid(), threading.get_native_id()
  for e in spans.values():
    assert e["ph"] == "X" and e["pid"] == pid and e["tid"] == tid
    assert e["dur"] >= 0 and e["ts"] >= 0
  assert spans["outer"]["args"] == {"module": "m"}
  assert spans["inner1"]["args"] == {"ops": 3}
  assert "args" not in spans["leaf"]
  assert _inside(spans["inner1"], spans["outer"])
  assert _inside(spans["inner2"], spans["outer"])
  assert _inside(spans["leaf"], spans["inner2"])
  assert (spans["inner1"]["ts"] + spans["inner1"]["dur"] <=
          spans["inner2"]["ts"] + _EPS)
  # Sorted by start time, parents first.
  names = [e["name"] for e in _spans(data)]
  assert names.index("outer") < names.index("inner1") < names.index("inner2")
  assert {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
          "args": {"name": threading.current_thread().name}
         } in data["traceEvents"]


def test_decorator_bare_and_named():
  @trace.traced
  def compile_module(x):
    return x + 1

  @trace.traced(name="custom")
  def run(x):
    return compile_module(x) * 2

  assert run(1) == 4  # Works untraced too.
  assert compile_module.__name__ == "compile_module"
  trace.start()
  assert run(2) == 6
  data = trace.stop()
  spans = _by_name(data)
  inner = spans[compile_module.__qualname__]
  assert inner["name"].endswith("compile_module")
  assert _inside(inner, spans["custom"])
  assert len(_spans(data)) == 2


def test_exception_is_recorded_and_propagates():
  trace.start()
  with pytest.raises(KeyError):
    with trace.scope("fails"):
      raise KeyError("x")
  data = trace.stop()
  assert _by_name(data)["fails"]["args"] == {"error": "KeyError"}
  assert trace.current_scope_names() == []


def test_instant_and_counter():
  trace.start()
  with trace.scope("s"):
    trace.instant("mark", why="test")
    trace.counter("memory", bytes=1024)
  data = trace.stop()
  (mark,) = [e for e in data["traceEvents"] if e["ph"] == "i"]
  (count,) = [e for e in data["traceEvents"] if e["ph"] == "C"]
  assert mark["name"] == "mark" and mark["s"] == "t"
  assert mark["args"] == {"why": "test"}
  assert count["args"] == {"bytes": 1024}
  assert _inside({"ts": mark["ts"], "dur": 0}, _by_name(data)["s"])


def test_threads_have_their_own_stacks():
  trace.start()
  barrier = threading.Barrier(4)
  seen = {}

  def work(i):
    with trace.scope(f"thread{i}"):
      barrier.wait()  # All four open at once.
      with trace.scope(f"child{i}"):
        seen[i] = trace.current_scope_names()

  threads = [threading.Thread(target=work, args=(i,), name=f"worker{i}")
             for i in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  data = trace.stop()
  spans = _by_name(data)
  assert seen == {i: [f"thread{i}", f"child{i}"] for i in range(4)}
  tids = {spans[f"thread{i}"]["tid"] for i in range(4)}
  assert len(tids) == 4
  for i in range(4):
    assert spans[f"child{i}"]["tid"] == spans[f"thread{i}"]["tid"]
    assert _inside(spans[f"child{i}"], spans[f"thread{i}"])
  names = {e["args"]["name"] for e in data["traceEvents"]
           if e["name"] == "thread_name"}
  assert {f"worker{i}" for i in range(4)} <= names


def test_scope_open_across_stop_is_dropped():
  trace.start()
  with trace.scope("straddles"):
    data = trace.stop()
  assert _spans(data) == []
  trace.start()
  assert _spans(trace.stop()) == []


def test_generator_scope_closing_out_of_order():
  def gen():
    with trace.scope("gen"):
      yield 1
      yield 2

  trace.start()
  it = gen()
  with trace.scope("caller"):
    next(it)  # "gen" opens inside "caller"...
  assert trace.current_scope_names() == ["gen"]  # ...and outlives it.
  list(it)
  assert trace.current_scope_names() == []
  assert set(_by_name(trace.stop())) == {"caller", "gen"}


def test_args_that_json_cannot_encode_are_stringified(tmp_path):
  trace.start()
  with trace.scope("obj", shape=(2, 3), thing=object()):
    pass
  path = tmp_path / "t.json"
  trace.stop(path)
  args = _by_name(json.loads(path.read_text()))["obj"]["args"]
  assert args["shape"] == [2, 3]
  assert args["thing"].startswith("<object object")


def test_trace_to_flag_writes_at_exit(tmp_path):
  path = tmp_path / "out" / "exit.json"
  program = ("from support._src import trace\n"
             "with trace.scope('a', n=1):\n"
             "  with trace.scope('b'):\n"
             "    pass\n")
  env = dict(os.environ, **{flags.ENV_VAR: f"--trace_to={path}"})
  root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
  subprocess.run([sys.executable, "-c", program], env=env, check=True,
                 timeout=60)
  spans = _by_name(json.loads(path.read_text()))
  assert set(spans) == {"a", "b"}
  assert _inside(spans["b"], spans["a"])
  assert spans["a"]["args"] == {"n": 1}


def test_off_path_is_one_shared_no_op():
  assert not trace.is_enabled()
  assert trace.scope("a", k=1) is trace.scope("b")
