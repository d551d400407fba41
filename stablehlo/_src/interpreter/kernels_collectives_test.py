"""Tests for interpreter.run_parallel and the collective kernels.

Expectations come from the spec's formulas, computed with numpy here.
"""

import io
import re
import time

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import conformance_run
from stablehlo._src.interpreter import corpus_testing
from stablehlo._src.interpreter import kernels_collectives as kc
from stablehlo._src.interpreter import process_grid as pg
from stablehlo._src.ops import registry
from support import env
import support


@pytest.fixture(autouse=True)
def _add_kernel(monkeypatch):
  """Reductions below use stablehlo.add, which another kernel family
  provides; stand in with numpy's add only while it is missing."""
  d = registry.lookup("stablehlo.add")
  if d.interpreter is None:
    monkeypatch.setattr(d, "interpreter",
                        lambda ctx, op, args: np.add(args[0], args[1]))


def _run(src, fn=None, args=(), options=None):
  module = text.parse_module(src, "t.mlir")
  interp = interpreter.Interpreter(module, options)
  return interp, interp.run(fn, list(args))


_ADD = """({
      ^bb0(%a: tensor<i64>, %b: tensor<i64>):
        %s = stablehlo.add %a, %b : tensor<i64>
        stablehlo.return %s : tensor<i64>
    })"""


def _grid(programs, n_in, ty, extra=""):
  rows = ", ".join("[" + ", ".join(f"@{p}" for p in row) + "]"
                   for row in programs)
  n = sum(len(r) for r in programs)
  ins = ", ".join([ty] * (n * n_in))
  return (f'"interpreter.run_parallel"(%args) {{programs = [{rows}]{extra}}}'
          f" : ({ins})")


def _main(body_fn, programs, n_in, in_ty, out_ty):
  """A @main that takes every process's inputs and returns all results."""
  n = sum(len(r) for r in programs) * n_in
  rows = ", ".join("[" + ", ".join(f"@{p}" for p in row) + "]"
                   for row in programs)
  m = sum(len(r) for r in programs)
  args = ", ".join(f"%a{i}: {in_ty}" for i in range(n))
  names = ", ".join(f"%a{i}" for i in range(n))
  outs = ", ".join([out_ty] * m)
  ins = ", ".join([in_ty] * n)
  return f"""
  func.func @main({args}) -> ({outs}) {{
    %r:{m} = "interpreter.run_parallel"({names}) {{programs = [{rows}]}}
        : ({ins}) -> ({outs})
    return {", ".join(f"%r#{i}" for i in range(m))} : {outs}
  }}
  {body_fn}"""


def _module(*funcs):
  return "module {\n" + "\n".join(funcs) + "\n}"


# --- process ids --------------------------------------------------------------


def test_replica_and_partition_ids_on_a_2x3_grid():
  src = _module(
      """func.func @ids() -> (tensor<ui32>, tensor<ui32>) {
        %r = stablehlo.replica_id : tensor<ui32>
        %p = stablehlo.partition_id : tensor<ui32>
        return %r, %p : tensor<ui32>, tensor<ui32>
      }""",
      """func.func @main() -> (""" + ", ".join(["tensor<ui32>"] * 12) + """) {
        %r:12 = "interpreter.run_parallel"() {
          programs = [[@ids, @ids, @ids], [@ids, @ids, @ids]]
        } : () -> (""" + ", ".join(["tensor<ui32>"] * 12) + """)
        return """ + ", ".join(f"%r#{i}" for i in range(12)) + " : " +
      ", ".join(["tensor<ui32>"] * 12) + "\n}")
  _, out = _run(src)
  got = [(int(out[2 * i]), int(out[2 * i + 1])) for i in range(6)]
  assert got == [(r, p) for r in range(2) for p in range(3)]
  assert out[0].dtype == np.uint32


def test_ids_outside_run_parallel_are_zero():
  src = _module("""func.func @main() -> (tensor<ui32>, tensor<ui32>) {
    %r = stablehlo.replica_id : tensor<ui32>
    %p = stablehlo.partition_id : tensor<ui32>
    return %r, %p : tensor<ui32>, tensor<ui32>
  }""")
  _, out = _run(src)
  assert [int(x) for x in out] == [0, 0]


# --- collectives --------------------------------------------------------------


def _inputs(n, shape, seed=0):
  rng = np.random.default_rng(seed)
  return [rng.integers(-50, 50, size=shape).astype(np.int64)
          for _ in range(n)]


def test_all_reduce_cross_replica_groups():
  body = """func.func @f(%x: tensor<3xi64>) -> tensor<3xi64> {
    %r = "stablehlo.all_reduce"(%x) """ + _ADD + """ {
      replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
    } : (tensor<3xi64>) -> tensor<3xi64>
    return %r : tensor<3xi64>
  }"""
  progs = [["f"]] * 4
  xs = _inputs(4, (3,))
  _, out = _run(_module(_main(body, progs, 1, "tensor<3xi64>",
                              "tensor<3xi64>")), args=xs)
  want = [xs[0] + xs[2], xs[1] + xs[3], xs[0] + xs[2], xs[1] + xs[3]]
  for o, w in zip(out, want):
    np.testing.assert_array_equal(o, w)


def test_all_reduce_non_elementwise_region_runs_per_element():
  # A reshape in the body makes the batched path unsafe: per element.
  body = """func.func @f(%x: tensor<2x2xi64>) -> tensor<2x2xi64> {
    %r = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<i64>, %b: tensor<i64>):
        %s = stablehlo.add %a, %b : tensor<i64>
        %t = stablehlo.reshape %s : (tensor<i64>) -> tensor<i64>
        stablehlo.return %t : tensor<i64>
    }) {
      replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>
    } : (tensor<2x2xi64>) -> tensor<2x2xi64>
    return %r : tensor<2x2xi64>
  }"""
  progs = [["f"]] * 3
  xs = _inputs(3, (2, 2), seed=1)
  _, out = _run(_module(_main(body, progs, 1, "tensor<2x2xi64>",
                              "tensor<2x2xi64>")), args=xs)
  for o in out:
    np.testing.assert_array_equal(o, xs[0] + xs[1] + xs[2])


def test_all_gather_flattened_ids_on_2x2():
  body = """func.func @f(%x: tensor<1x2xi64>) -> tensor<4x2xi64> {
    %r = "stablehlo.all_gather"(%x) {
      all_gather_dim = 0 : i64,
      replica_groups = dense<[[3, 0, 1, 2]]> : tensor<1x4xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
      use_global_device_ids
    } : (tensor<1x2xi64>) -> tensor<4x2xi64>
    return %r : tensor<4x2xi64>
  }"""
  progs = [["f", "f"], ["f", "f"]]
  xs = _inputs(4, (1, 2), seed=2)  # process order (0,0) (0,1) (1,0) (1,1)
  _, out = _run(_module(_main(body, progs, 1, "tensor<1x2xi64>",
                              "tensor<4x2xi64>")), args=xs)
  want = np.concatenate([xs[3], xs[0], xs[1], xs[2]], axis=0)
  for o in out:
    np.testing.assert_array_equal(o, want)


def test_all_to_all_cross_partition():
  body = """func.func @f(%x: tensor<2x6xi64>) -> tensor<6x2xi64> {
    %r = "stablehlo.all_to_all"(%x) {
      split_dimension = 1 : i64, concat_dimension = 0 : i64,
      split_count = 3 : i64,
      replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
    } : (tensor<2x6xi64>) -> tensor<6x2xi64>
    return %r : tensor<6x2xi64>
  }"""
  progs = [["f", "f", "f"]]
  xs = _inputs(3, (2, 6), seed=3)
  _, out = _run(_module(_main(body, progs, 1, "tensor<2x6xi64>",
                              "tensor<6x2xi64>")), args=xs)
  for i, o in enumerate(out):
    want = np.concatenate([np.split(x, 3, axis=1)[i] for x in xs], axis=0)
    np.testing.assert_array_equal(o, want)


def test_reduce_scatter_cross_replica():
  body = """func.func @f(%x: tensor<4x2xi64>) -> tensor<2x2xi64> {
    %r = "stablehlo.reduce_scatter"(%x) """ + _ADD + """ {
      scatter_dimension = 0 : i64,
      replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>
    } : (tensor<4x2xi64>) -> tensor<2x2xi64>
    return %r : tensor<2x2xi64>
  }"""
  progs = [["f"], ["f"]]
  xs = _inputs(2, (4, 2), seed=4)
  _, out = _run(_module(_main(body, progs, 1, "tensor<4x2xi64>",
                              "tensor<2x2xi64>")), args=xs)
  total = xs[0] + xs[1]
  # group [1, 0]: replica 1 is index 0 and gets the first half.
  np.testing.assert_array_equal(out[1], total[:2])
  np.testing.assert_array_equal(out[0], total[2:])


def test_collective_permute_ring_and_zeros():
  body = """func.func @f(%x: tensor<2xi64>) -> tensor<2xi64> {
    %r = "stablehlo.collective_permute"(%x) {
      source_target_pairs = dense<[[0, 1], [1, 2], [2, 0]]> : tensor<3x2xi64>
    } : (tensor<2xi64>) -> tensor<2xi64>
    return %r : tensor<2xi64>
  }"""
  progs = [["f"]] * 4
  xs = _inputs(4, (2,), seed=5)
  _, out = _run(_module(_main(body, progs, 1, "tensor<2xi64>",
                              "tensor<2xi64>")), args=xs)
  np.testing.assert_array_equal(out[1], xs[0])
  np.testing.assert_array_equal(out[2], xs[1])
  np.testing.assert_array_equal(out[0], xs[2])
  np.testing.assert_array_equal(out[3], np.zeros(2, np.int64))


def test_collective_broadcast_dynamic_root():
  body = """func.func @f(%x: tensor<2xi64>) -> tensor<2xi64> {
    %root = stablehlo.constant dense<[2]> : tensor<1xi32>
    %r = "stablehlo.collective_broadcast"(%x, %root) {
      replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>,
      has_dynamic_root = true
    } : (tensor<2xi64>, tensor<1xi32>) -> tensor<2xi64>
    return %r : tensor<2xi64>
  }"""
  progs = [["f"]] * 4
  xs = _inputs(4, (2,), seed=6)
  _, out = _run(_module(_main(body, progs, 1, "tensor<2xi64>",
                              "tensor<2xi64>")), args=xs)
  for i in range(3):
    np.testing.assert_array_equal(out[i], xs[2])
  np.testing.assert_array_equal(out[3], np.zeros(2, np.int64))


def test_collective_reduce_root_only():
  body = """func.func @f(%x: tensor<2xi64>) -> tensor<2xi64> {
    %r = "stablehlo.collective_reduce"(%x) """ + _ADD + """ {
      replica_groups = dense<[[2, 0, 1]]> : tensor<1x3xi64>
    } : (tensor<2xi64>) -> tensor<2xi64>
    return %r : tensor<2xi64>
  }"""
  progs = [["f"]] * 3
  xs = _inputs(3, (2,), seed=7)
  _, out = _run(_module(_main(body, progs, 1, "tensor<2xi64>",
                              "tensor<2xi64>")), args=xs)
  np.testing.assert_array_equal(out[2], xs[0] + xs[1] + xs[2])
  np.testing.assert_array_equal(out[0], np.zeros(2, np.int64))
  np.testing.assert_array_equal(out[1], np.zeros(2, np.int64))


def test_all_reduce_outside_run_parallel_is_identity():
  src = _module("""func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
    %r = "stablehlo.all_reduce"(%x) """ + _ADD + """ {
      replica_groups = dense<[[0]]> : tensor<1x1xi64>
    } : (tensor<3xi64>) -> tensor<3xi64>
    return %r : tensor<3xi64>
  }""")
  x = np.array([4, 5, 6], np.int64)
  _, out = _run(src, args=[x])
  np.testing.assert_array_equal(out[0], x)


def test_async_start_done_all_gather():
  body = """func.func @f(%x: tensor<1x2xf32>) -> tensor<2x2xf32> {
    %fut = "stablehlo.async_start"(%x) ({
    ^bb0(%y: tensor<1x2xf32>):
      %g = "stablehlo.all_gather"(%y) {
        all_gather_dim = 0 : i64,
        replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
      } : (tensor<1x2xf32>) -> tensor<2x2xf32>
      "stablehlo.return"(%g) : (tensor<2x2xf32>) -> ()
    }) : (tensor<1x2xf32>) -> !stablehlo.future<tensor<2x2xf32>>
    %r = "stablehlo.async_done"(%fut)
        : (!stablehlo.future<tensor<2x2xf32>>) -> tensor<2x2xf32>
    return %r : tensor<2x2xf32>
  }"""
  xs = [np.array([[1.5, 2.5]], np.float32), np.array([[3.5, 4.5]],
                                                      np.float32)]
  _, out = _run(_module(_main(body, [["f"], ["f"]], 1, "tensor<1x2xf32>",
                              "tensor<2x2xf32>")), args=xs)
  for o in out:
    np.testing.assert_array_equal(o, np.concatenate(xs, axis=0))


# --- send / recv, infeed / outfeed --------------------------------------------


def test_send_recv_with_source_target_pairs():
  src = _module("""
  func.func @p(%x: tensor<2xi64>) -> tensor<2xi64> {
    %t = stablehlo.after_all : !stablehlo.token
    %s = "stablehlo.send"(%x, %t) {
      channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>,
      is_host_transfer = false,
      source_target_pairs = dense<[[0, 1], [1, 2]]> : tensor<2x2xi64>
    } : (tensor<2xi64>, !stablehlo.token) -> !stablehlo.token
    %r:2 = "stablehlo.recv"(%t) {
      channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>,
      is_host_transfer = false,
      source_target_pairs = dense<[[0, 1], [1, 2]]> : tensor<2x2xi64>
    } : (!stablehlo.token) -> (tensor<2xi64>, !stablehlo.token)
    return %r#0 : tensor<2xi64>
  }""", """
  func.func @main(%a: tensor<2xi64>, %b: tensor<2xi64>, %c: tensor<2xi64>)
      -> (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) {
    %r:3 = "interpreter.run_parallel"(%a, %b, %c) {
      programs = [[@p, @p, @p]]
    } : (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)
        -> (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)
    return %r#0, %r#1, %r#2 : tensor<2xi64>, tensor<2xi64>, tensor<2xi64>
  }""")
  xs = _inputs(3, (2,), seed=8)
  _, out = _run(src, args=xs)
  np.testing.assert_array_equal(out[0], np.zeros(2, np.int64))
  np.testing.assert_array_equal(out[1], xs[0])
  np.testing.assert_array_equal(out[2], xs[1])


def test_infeed_from_attribute_and_outfeed_records():
  src = _module("""
  func.func @q0() -> tensor<2xi64> {
    %c = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
    return %c : tensor<2xi64>
  }
  func.func @q1() -> tensor<2xi64> {
    %c = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
    return %c : tensor<2xi64>
  }
  func.func @p(%t: !stablehlo.token) -> tensor<2xi64> {
    %a:2 = "stablehlo.infeed"(%t) : (!stablehlo.token)
        -> (tensor<2xi64>, !stablehlo.token)
    %b:2 = "stablehlo.infeed"(%a#1) : (!stablehlo.token)
        -> (tensor<2xi64>, !stablehlo.token)
    %o = "stablehlo.outfeed"(%b#0, %a#0, %b#1)
        : (tensor<2xi64>, tensor<2xi64>, !stablehlo.token) -> !stablehlo.token
    return %b#0 : tensor<2xi64>
  }""", """
  func.func @main() -> tensor<2xi64> {
    %t = stablehlo.after_all : !stablehlo.token
    %r = "interpreter.run_parallel"(%t) {
      infeed = [@q0, @q1], programs = [[@p]]
    } : (!stablehlo.token) -> tensor<2xi64>
    return %r : tensor<2xi64>
  }""")
  interp, out = _run(src)
  np.testing.assert_array_equal(out[0], [3, 4])
  records = kc.last_grid(interp).outfeed
  assert len(records) == 1
  pid, values = records[0]
  assert pid == pg.ProcessId(0, 0)
  np.testing.assert_array_equal(values[0], [3, 4])
  np.testing.assert_array_equal(values[1], [1, 2])


def test_infeed_empty_is_an_error():
  src = _module("""
  func.func @main() -> tensor<2xi64> {
    %t = stablehlo.after_all : !stablehlo.token
    %a:2 = "stablehlo.infeed"(%t) : (!stablehlo.token)
        -> (tensor<2xi64>, !stablehlo.token)
    return %a#0 : tensor<2xi64>
  }""")
  with pytest.raises(support.OutOfRangeError, match="infeed is empty"):
    _run(src)


def test_infeed_of_a_plain_run_from_the_default_grid():
  src = _module("""
  func.func @main() -> (tensor<2xi64>, tensor<i1>) {
    %t = stablehlo.after_all : !stablehlo.token
    %a:3 = "stablehlo.infeed"(%t) : (!stablehlo.token)
        -> (tensor<2xi64>, tensor<i1>, !stablehlo.token)
    return %a#0, %a#1 : tensor<2xi64>, tensor<i1>
  }""")
  interp = interpreter.Interpreter(text.parse_module(src, "t.mlir"))
  kc.default_process(interp).grid.push_infeed(np.array([7, 8]), True)
  out = interp.run()
  np.testing.assert_array_equal(out[0], [7, 8])
  assert out[0].dtype == np.int64 and out[1].dtype == np.bool_
  assert bool(out[1])


# --- robustness ---------------------------------------------------------------


def test_error_in_one_process_does_not_hang_the_others():
  src = _module("""
  func.func @bad(%x: tensor<2xi64>) -> tensor<2xi64> {
    %y = stablehlo.custom_call @no_such_target(%x)
        : (tensor<2xi64>) -> tensor<2xi64>
    return %y : tensor<2xi64>
  }
  func.func @good(%x: tensor<2xi64>) -> tensor<2xi64> {
    %r = "stablehlo.all_reduce"(%x) """ + _ADD + """ {
      replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
    } : (tensor<2xi64>) -> tensor<2xi64>
    return %r : tensor<2xi64>
  }""", _main("", [["good"], ["good"], ["bad"], ["good"]], 1,
              "tensor<2xi64>", "tensor<2xi64>"))
  t0 = time.monotonic()
  with pytest.raises(support.UnimplementedError) as info:
    _run(src, args=_inputs(4, (2,)))
  assert time.monotonic() - t0 < 20
  msg = str(info.value)
  assert "no_such_target" in msg and "process (2, 0)" in msg


def test_missing_partner_is_a_deadlock_naming_the_collective():
  src = _module("""
  func.func @lonely(%x: tensor<2xi64>) -> tensor<2xi64> {
    %r = "stablehlo.all_gather"(%x) {
      all_gather_dim = 0 : i64,
      replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
    } : (tensor<2xi64>) -> tensor<4xi64>
    %s = "stablehlo.slice"(%r) {start_indices = array<i64: 0>,
        limit_indices = array<i64: 2>, strides = array<i64: 1>}
        : (tensor<4xi64>) -> tensor<2xi64>
    return %s : tensor<2xi64>
  }
  func.func @idle(%x: tensor<2xi64>) -> tensor<2xi64> {
    return %x : tensor<2xi64>
  }""", _main("", [["lonely"], ["idle"]], 1, "tensor<2xi64>",
              "tensor<2xi64>"))
  with pytest.raises(pg.DeadlockError) as info:
    _run(src, args=_inputs(2, (2,)))
  assert "stablehlo.all_gather" in str(info.value)
  assert "waiting for [(1, 0)]" in str(info.value)


def test_recv_without_send_outside_run_parallel_is_a_deadlock():
  src = _module("""
  func.func @main() -> tensor<2xi64> {
    %t = stablehlo.after_all : !stablehlo.token
    %r:2 = "stablehlo.recv"(%t) {
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 3>,
      is_host_transfer = true
    } : (!stablehlo.token) -> (tensor<2xi64>, !stablehlo.token)
    return %r#0 : tensor<2xi64>
  }""")
  with pytest.raises(pg.DeadlockError, match="stablehlo.recv"):
    _run(src)


def test_more_processes_than_cpus_4x8():
  # 32 processes that all block in the same all_reduce at once: a
  # fixed-size worker pool smaller than 32 would never finish.
  add_u32 = _ADD.replace("i64", "ui32")
  everyone = ", ".join(str(i) for i in range(32))
  body = """func.func @f() -> (tensor<ui32>, tensor<ui32>) {
    %r = stablehlo.replica_id : tensor<ui32>
    %p = stablehlo.partition_id : tensor<ui32>
    %x = "stablehlo.all_reduce"(%r) """ + add_u32 + """ {
      replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
    } : (tensor<ui32>) -> tensor<ui32>
    %y:2 = "stablehlo.all_reduce"(%x, %p) """ + add_u32 + """ {
      replica_groups = dense<[[""" + everyone + """]]> : tensor<1x32xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
      use_global_device_ids
    } : (tensor<ui32>, tensor<ui32>) -> (tensor<ui32>, tensor<ui32>)
    return %y#0, %y#1 : tensor<ui32>, tensor<ui32>
  }"""
  outs = ", ".join(["tensor<ui32>"] * 64)
  rows = ", ".join("[" + ", ".join(["@f"] * 8) + "]" for _ in range(4))
  src = _module(body, f"""func.func @main() -> ({outs}) {{
    %r:64 = "interpreter.run_parallel"() {{programs = [{rows}]}}
        : () -> ({outs})
    return {", ".join(f"%r#{i}" for i in range(64))} : {outs}
  }}""")
  _, out = _run(src)
  # Replica ids per partition sum to 0+1+2+3 = 6, then over all 32
  # processes to 32 * 6; partition ids over all 32: 4 * (0+...+7).
  assert [int(x) for x in out] == [32 * 6, 4 * 28] * 32


def test_run_parallel_input_count_mismatch():
  src = _module("""
  func.func @f(%x: tensor<i64>) -> tensor<i64> {
    return %x : tensor<i64>
  }
  func.func @main(%a: tensor<i64>) -> tensor<i64> {
    %r = "interpreter.run_parallel"(%a) {programs = [[@f], [@f]]}
        : (tensor<i64>) -> tensor<i64>
    return %r : tensor<i64>
  }""")
  with pytest.raises(support.InvalidArgumentError):
    _run(src, args=[np.asarray(1, np.int64)])


def test_prints_inside_run_parallel_are_not_interleaved():
  src = _module("""
  func.func @f(%x: tensor<3xi64>) -> tensor<3xi64> {
    interpreter.print %x : tensor<3xi64>
    return %x : tensor<3xi64>
  }""", _main("", [["f"] * 4] * 4, 1, "tensor<3xi64>", "tensor<3xi64>"))
  buf = io.StringIO()
  xs = [np.full(3, i, np.int64) for i in range(16)]
  _run(src, args=xs, options=interpreter.Options(out=buf))
  blocks = buf.getvalue().strip().split("\n")
  assert sorted(blocks) == sorted(
      f"%arg0 = tensor<3xi64> {{\n  [{i}, {i}, {i}]\n}}".split("\n")[j]
      for i in range(16) for j in range(3))
  text_out = buf.getvalue()
  for i in range(16):
    assert f"%arg0 = tensor<3xi64> {{\n  [{i}, {i}, {i}]\n}}" in text_out


# --- corpus -------------------------------------------------------------------

_CORPUS_FILES = ("all_gather", "all_reduce", "all_to_all",
                 "collective_broadcast", "collective_permute",
                 "collective_reduce", "reduce_scatter", "replica_id",
                 "partition_id", "send_recv", "infeed", "outfeed")


@pytest.mark.parametrize("name", _CORPUS_FILES)
def test_corpus_file(name):
  assert corpus_testing.run_corpus_file("interpret", f"{name}.mlir") >= 1


@pytest.mark.skipif(env.stablehlo_corpus("interpret") is None,
                    reason=env.missing_corpus_reason("interpret"))
def test_corpus_printing_run_parallel_case():
  d = registry.lookup("stablehlo.iota")
  if d is None or d.interpreter is None:
    pytest.skip("stablehlo.iota has no kernel yet")
  path = env.stablehlo_corpus("interpret") / "printing.mlir"
  cases = [c for c in text.split_input_file(path.read_text())
           if "interpreter.run_parallel" in c.text]
  assert cases
  for case in cases:
    out = conformance_run.run_case(case.text, str(path), case.first_line)
    # Two whole blocks, one per process (the SSA-name prefix is the
    # printer's business, not run_parallel's).
    block = r"(%\w+ = )?tensor<2xi32> \{\n  \[0, 1\]\n\}\n"
    assert re.fullmatch(f"{block}{block}", out), out
