"""Tests for the control-flow kernels (while, if, case, chlo.scan) and the
loop limits. Loops count with shift registers built from shape ops (slice,
concatenate, reshape) so the expectations are plain iteration counts."""

import time

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import corpus_testing
from stablehlo._src.interpreter import evaluator
from stablehlo._src.interpreter import runtime
from stablehlo._src.ops import registry
from stablehlo._src.ops import verify
import support


def _interp(src, **opts):
  module = text.parse_module(src, "c.mlir")
  verify.verify_module(module)
  return interpreter.Interpreter(module, interpreter.Options(**opts))


def _run(src, *args, **opts):
  return _interp(src, **opts).run("main", list(args))


# A while loop over a tensor<Nxi1> "tape": it runs while tape[0] is true and
# each iteration shifts the tape left by one (appending false), so it runs
# as many times as the tape has leading trues. The count tape collects one
# true per iteration at its front.
_COUNTING_WHILE = """
func.func @main(%tape: tensor<5xi1>) -> (tensor<5xi1>, tensor<8xi1>) {
  %f1 = stablehlo.constant dense<false> : tensor<1xi1>
  %t1 = stablehlo.constant dense<true> : tensor<1xi1>
  %zero = stablehlo.constant dense<false> : tensor<8xi1>
  %r:2 = stablehlo.while(%a = %tape, %c = %zero) : tensor<5xi1>, tensor<8xi1>
  cond {
    %h = stablehlo.slice %a [0:1] : (tensor<5xi1>) -> tensor<1xi1>
    %p = stablehlo.reshape %h : (tensor<1xi1>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %rest = stablehlo.slice %a [1:5] : (tensor<5xi1>) -> tensor<4xi1>
    %a2 = stablehlo.concatenate %rest, %f1, dim = 0
        : (tensor<4xi1>, tensor<1xi1>) -> tensor<5xi1>
    %keep = stablehlo.slice %c [0:7] : (tensor<8xi1>) -> tensor<7xi1>
    %c2 = stablehlo.concatenate %t1, %keep, dim = 0
        : (tensor<1xi1>, tensor<7xi1>) -> tensor<8xi1>
    stablehlo.return %a2, %c2 : tensor<5xi1>, tensor<8xi1>
  }
  return %r#0, %r#1 : tensor<5xi1>, tensor<8xi1>
}
"""


@pytest.mark.parametrize("tape,n", [
    ([1, 1, 1, 0, 1], 3), ([0, 1, 1, 1, 1], 0), ([1, 1, 1, 1, 1], 5)])
def test_while_runs_until_cond_is_false(tape, n):
  a, c = _run(_COUNTING_WHILE, np.array(tape, bool))
  assert a.tolist() == [bool(v) for v in (tape[n:] + [0] * n)]
  assert c.tolist() == [True] * n + [False] * (8 - n)


def test_while_limit_counts_iterations_of_one_loop():
  # 5 iterations pass under a limit of 5 and fail under 4.
  tape = np.ones(5, bool)
  _run(_COUNTING_WHILE, tape, max_while_iterations=5)
  with pytest.raises(evaluator.ResourceExhausted, match="more than 4"):
    _run(_COUNTING_WHILE, tape, max_while_iterations=4)


_RUNAWAY = """
func.func @main() -> tensor<2xf32> {
  %x = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %r = stablehlo.while(%a = %x) : tensor<2xf32>
  cond {
    %t = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %t : tensor<i1>
  } do {
    %b = stablehlo.reverse %a, dims = [0] : tensor<2xf32>
    stablehlo.return %b : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}
"""


def test_runaway_while_stops_at_iteration_limit():
  it = _interp(_RUNAWAY, max_while_iterations=1000)
  with pytest.raises(evaluator.ResourceExhausted) as e:
    it.run()
  assert isinstance(e.value, support.XlaError)
  assert e.value.code == support.StatusCode.RESOURCE_EXHAUSTED
  assert "more than 1000 iterations" in str(e.value)
  assert str(e.value).startswith("c.mlir:4:")  # the while op's location


def test_runaway_while_stops_at_timeout():
  it = _interp(_RUNAWAY, max_while_iterations=None, timeout_s=0.2)
  start = time.monotonic()
  with pytest.raises(evaluator.ResourceExhausted, match="time limit"):
    it.run()
  assert time.monotonic() - start < 30


def test_nested_whiles_share_the_scope():
  # Outer loop runs twice (tape [T, T, F]); each outer iteration runs an
  # inner loop of 3 iterations, each pushing a true on the count tape.
  src = """
  func.func @main() -> tensor<8xi1> {
    %f1 = stablehlo.constant dense<false> : tensor<1xi1>
    %t1 = stablehlo.constant dense<true> : tensor<1xi1>
    %outer = stablehlo.constant dense<[true, true, false]> : tensor<3xi1>
    %inner = stablehlo.constant dense<[true, true, true, false]> : tensor<4xi1>
    %zero = stablehlo.constant dense<false> : tensor<8xi1>
    %r:2 = stablehlo.while(%o = %outer, %c = %zero) : tensor<3xi1>, tensor<8xi1>
    cond {
      %h = stablehlo.slice %o [0:1] : (tensor<3xi1>) -> tensor<1xi1>
      %p = stablehlo.reshape %h : (tensor<1xi1>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %q:2 = stablehlo.while(%i = %inner, %d = %c) : tensor<4xi1>, tensor<8xi1>
      cond {
        %h2 = stablehlo.slice %i [0:1] : (tensor<4xi1>) -> tensor<1xi1>
        %p2 = stablehlo.reshape %h2 : (tensor<1xi1>) -> tensor<i1>
        stablehlo.return %p2 : tensor<i1>
      } do {
        %rest = stablehlo.slice %i [1:4] : (tensor<4xi1>) -> tensor<3xi1>
        %i2 = stablehlo.concatenate %rest, %f1, dim = 0
            : (tensor<3xi1>, tensor<1xi1>) -> tensor<4xi1>
        %keep = stablehlo.slice %d [0:7] : (tensor<8xi1>) -> tensor<7xi1>
        %d2 = stablehlo.concatenate %t1, %keep, dim = 0
            : (tensor<1xi1>, tensor<7xi1>) -> tensor<8xi1>
        stablehlo.return %i2, %d2 : tensor<4xi1>, tensor<8xi1>
      }
      %orest = stablehlo.slice %o [1:3] : (tensor<3xi1>) -> tensor<2xi1>
      %o2 = stablehlo.concatenate %orest, %f1, dim = 0
          : (tensor<2xi1>, tensor<1xi1>) -> tensor<3xi1>
      stablehlo.return %o2, %q#1 : tensor<3xi1>, tensor<8xi1>
    }
    return %r#1 : tensor<8xi1>
  }"""
  (c,) = _run(src)
  assert c.tolist() == [True] * 6 + [False] * 2


def test_while_carries_tokens_and_tuples():
  src = """
  func.func @main(%x: tensor<i32>) -> (!stablehlo.token, tuple<tensor<i32>>) {
    %k = stablehlo.create_token : !stablehlo.token
    %t = stablehlo.tuple %x : tuple<tensor<i32>>
    %f = stablehlo.constant dense<false> : tensor<i1>
    %r:2 = stablehlo.while(%a = %k, %b = %t)
        : !stablehlo.token, tuple<tensor<i32>>
    cond {
      stablehlo.return %f : tensor<i1>
    } do {
      stablehlo.return %a, %b : !stablehlo.token, tuple<tensor<i32>>
    }
    return %r#0, %r#1 : !stablehlo.token, tuple<tensor<i32>>
  }"""
  tok, tup = _run(src, np.array(9, np.int32))
  assert tok is runtime.TOKEN and int(tup[0]) == 9


_IF = """
func.func @main(%p: tensor<i1>) -> (tensor<2xi64>, tensor<i8>) {
  %r:2 = "stablehlo.if"(%p) ({
    %a = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
    %b = stablehlo.constant dense<-1> : tensor<i8>
    stablehlo.return %a, %b : tensor<2xi64>, tensor<i8>
  }, {
    %a = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
    %b = stablehlo.constant dense<5> : tensor<i8>
    stablehlo.return %a, %b : tensor<2xi64>, tensor<i8>
  }) : (tensor<i1>) -> (tensor<2xi64>, tensor<i8>)
  return %r#0, %r#1 : tensor<2xi64>, tensor<i8>
}
"""


@pytest.mark.parametrize("pred,want", [(True, ([1, 2], -1)),
                                       (False, ([3, 4], 5))])
def test_if_selects_branch(pred, want):
  a, b = _run(_IF, np.array(pred))
  assert a.tolist() == want[0] and int(b) == want[1]


def test_if_without_results_runs_only_the_taken_branch():
  # The untaken branch would fail (real_dynamic_slice out of bounds).
  src = """
  func.func @main(%p: tensor<i1>, %x: tensor<?xi32>, %lim: tensor<1xi64>) {
    "stablehlo.if"(%p) ({
      stablehlo.return
    }, {
      %s = stablehlo.constant dense<0> : tensor<1xi64>
      %one = stablehlo.constant dense<1> : tensor<1xi64>
      %y = stablehlo.real_dynamic_slice %x, %s, %lim, %one
          : (tensor<?xi32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>)
          -> tensor<?xi32>
      stablehlo.return
    }) : (tensor<i1>) -> ()
    return
  }"""
  x, lim = np.arange(3, dtype=np.int32), np.array([9], np.int64)
  assert _run(src, np.array(True), x, lim) == []
  with pytest.raises(support.InvalidArgumentError, match="slice axis 0"):
    _run(src, np.array(False), x, lim)


_CASE = """
func.func @main(%i: tensor<i32>) -> tensor<i64> {
  %r = "stablehlo.case"(%i) ({
    %a = stablehlo.constant dense<10> : tensor<i64>
    stablehlo.return %a : tensor<i64>
  }, {
    %a = stablehlo.constant dense<11> : tensor<i64>
    stablehlo.return %a : tensor<i64>
  }, {
    %a = stablehlo.constant dense<12> : tensor<i64>
    stablehlo.return %a : tensor<i64>
  }) : (tensor<i32>) -> tensor<i64>
  return %r : tensor<i64>
}
"""


@pytest.mark.parametrize("index,want", [(0, 10), (1, 11), (2, 12), (3, 12),
                                        (-1, 12), (-2147483648, 12),
                                        (2147483647, 12)])
def test_case_out_of_range_runs_last_branch(index, want):
  (r,) = _run(_CASE, np.array(index, np.int32))
  assert int(r) == want


# --- chlo.scan ----------------------------------------------------------------

# A "delay line": each step outputs the carry and carries the current input,
# so outputs are the inputs shifted by one position with `init` in front.
_SCAN_DELAY = """
func.func @main(%x: tensor<2x4xi32>, %init: tensor<2xi32>)
    -> (tensor<2x4xi32>, tensor<2xi32>) {
  %r:2 = chlo.scan(%x) inits(%init) dimension=1 {REV} {
  ^bb0(%in: tensor<2xi32>, %carry: tensor<2xi32>):
    stablehlo.return %carry, %in : tensor<2xi32>, tensor<2xi32>
  } : (tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x4xi32>, tensor<2xi32>)
  return %r#0, %r#1 : tensor<2x4xi32>, tensor<2xi32>
}
"""


def test_scan_forward_along_dimension_1():
  x = np.arange(8, dtype=np.int32).reshape(2, 4)
  init = np.array([-1, -2], np.int32)
  out, carry = _run(_SCAN_DELAY.replace("{REV}", ""), x, init)
  assert out.tolist() == [[-1, 0, 1, 2], [-2, 4, 5, 6]]
  assert carry.tolist() == [3, 7]


def test_scan_reverse():
  x = np.arange(8, dtype=np.int32).reshape(2, 4)
  init = np.array([-1, -2], np.int32)
  out, carry = _run(_SCAN_DELAY.replace(
      "{REV}", "attributes {is_reverse = true}"), x, init)
  # Position k gets the carry left by position k + 1 (init at the end).
  assert out.tolist() == [[1, 2, 3, -1], [5, 6, 7, -2]]
  assert carry.tolist() == [0, 4]


def test_scan_counts_toward_the_iteration_limit():
  x = np.zeros((2, 4), np.int32)
  init = np.zeros(2, np.int32)
  with pytest.raises(evaluator.ResourceExhausted):
    _run(_SCAN_DELAY.replace("{REV}", ""), x, init, max_while_iterations=3)


def test_every_kernel_is_registered():
  for name in ("stablehlo.while", "stablehlo.if", "stablehlo.case",
               "chlo.scan"):
    assert registry.get(name).interpreter is not None, name


# --- corpus -------------------------------------------------------------------

_INTERPRET_FILES = ("while", "if", "case", "call", "chlo/scan")


@pytest.mark.parametrize("name", _INTERPRET_FILES)
def test_interpret_corpus(name):
  # call.mlir runs whole upstream; the others split at `// -----`: the RUN
  # lines say which.
  corpus_testing.run_corpus_file("interpret", f"{name}.mlir")
