"""Tests for the sliced-dot hoisting pass: where it applies, where it must
not, and that results match the evaluator on the original module."""

import numpy as np
import pytest

from xla.hlo.evaluator.hlo_evaluator import HloEvaluator
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import cpu_testing as ct
from xla.service.cpu import sliced_dot_hoisting

# A scan over the rows of xs (N rows of B x K): h = tanh(x_t w + h u).
# {trip}: the loop's trip count; {dot}: the input projection's dot line.
SCAN = """HloModule scan

cond {{
  p = (s32[], f32[{n},4,8], f32[8,6], f32[6,6], f32[4,6]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({trip})
  ROOT lt = pred[] compare(i, n), direction=LT
}}

body {{
  p = (s32[], f32[{n},4,8], f32[8,6], f32[6,6], f32[4,6]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  xs = f32[{n},4,8] get-tuple-element(p), index=1
  w = f32[8,6] get-tuple-element(p), index=2
  u = f32[6,6] get-tuple-element(p), index=3
  h = f32[4,6] get-tuple-element(p), index=4
  zero = s32[] constant(0)
  ds = f32[1,4,8] dynamic-slice(xs, i, zero, zero), dynamic_slice_sizes={{1,4,8}}
  x = f32[4,8] reshape(ds)
  {dot}
  hu = f32[4,6] dot(h, u), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  s = f32[4,6] add(xw, hu)
  h1 = f32[4,6] tanh(s)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[{n},4,8], f32[8,6], f32[6,6], f32[4,6]) tuple(i1, xs, w, u, h1)
}}

ENTRY e {{
  xs = f32[{n},4,8] parameter(0)
  w = f32[8,6] parameter(1)
  u = f32[6,6] parameter(2)
  h0 = f32[4,6] parameter(3)
  z = s32[] constant({start})
  t = (s32[], f32[{n},4,8], f32[8,6], f32[6,6], f32[4,6]) tuple(z, xs, w, u, h0)
  l = (s32[], f32[{n},4,8], f32[8,6], f32[6,6], f32[4,6]) while(t), condition=cond, body=body
  ROOT h = f32[4,6] get-tuple-element(l), index=4
}}
"""

X_W = ("xw = f32[4,6] dot(x, w), lhs_contracting_dims={1}, "
       "rhs_contracting_dims={0}")
# The same product with the slice on the right: (w^T x^T)^T spelled as
# dot(w, x) contracting w's dim 0 with x's dim 1 gives [6,4]; transpose.
W_X = ("wx = f32[6,4] dot(w, x), lhs_contracting_dims={0}, "
       "rhs_contracting_dims={1}\n  xw = f32[4,6] transpose(wx), "
       "dimensions={1,0}")


def _scan(n=5, trip=5, start=0, dot=X_W):
  return SCAN.format(n=n, trip=trip, start=start, dot=dot)


def _args(n, seed=0):
  rng = np.random.default_rng(seed)
  return [rng.standard_normal((n, 4, 8)).astype(np.float32),
          rng.standard_normal((8, 6)).astype(np.float32) / 3,
          rng.standard_normal((6, 6)).astype(np.float32) / 3,
          rng.standard_normal((4, 6)).astype(np.float32)]


def _rewrite(text):
  module = ct.parse(text)
  changed = sliced_dot_hoisting.SlicedDotHoisting().run(module)
  return module, changed


def _dots(comp):
  return [i for i in comp.instructions if i.opcode == HloOpcode.kDot]


@pytest.mark.parametrize("dot", [X_W, W_X], ids=["slice_lhs", "slice_rhs"])
def test_input_projection_leaves_the_loop(dot):
  text = _scan(dot=dot)
  module, changed = _rewrite(text)
  assert changed
  entry = module.entry_computation
  (big,) = _dots(entry)
  assert 5 in big.shape.dimensions and big.shape.rank == 3
  body = module.get_computation_with_name("body")
  assert len(_dots(body)) == 1  # only h u stays in the loop
  args = _args(5)
  want = HloEvaluator().evaluate(ct.parse(text), args)
  got = HloEvaluator().evaluate(module, args)
  ct.assert_same(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n,trip,start", [(8, 3, 0), (5, 4, 0)])
def test_not_applied_when_the_loop_runs_fewer_iterations_than_rows(
    n, trip, start):
  _, changed = _rewrite(_scan(n=n, trip=trip, start=start))
  assert not changed


def test_clamped_indices_agree_when_the_loop_runs_past_the_rows():
  # 7 iterations over 5 rows, starting at 1: the index runs past the end
  # and dynamic-slice clamps it, in the loop and in the product alike.
  text = _scan(n=5, trip=8, start=1)
  module, changed = _rewrite(text)
  assert changed
  args = _args(5, seed=1)
  want = HloEvaluator().evaluate(ct.parse(text), args)
  ct.assert_same(HloEvaluator().evaluate(module, args), want, rtol=1e-5,
                 atol=1e-6)


def test_not_applied_when_the_sliced_array_changes_in_the_loop():
  # The body writes xs back doubled: it is not loop-invariant.
  text = _scan().replace(
      "tuple(i1, xs, w, u, h1)",
      "tuple(i1, xs2, w, u, h1)").replace(
          "  one = s32[] constant(1)",
          "  xs2 = f32[5,4,8] add(xs, xs)\n  one = s32[] constant(1)")
  _, changed = _rewrite(text)
  assert not changed


def test_undone_when_code_motion_keeps_the_product_in_the_loop():
  # Loop-invariant code motion leaves a loop with control dependencies
  # alone; the dot must then stay as it was.
  text = _scan().replace("condition=cond, body=body",
                         "condition=cond, body=body, "
                         "control-predecessors={z}")
  module, changed = _rewrite(text)
  assert not changed
  body = module.get_computation_with_name("body")
  assert sorted(d.shape.rank for d in _dots(body)) == [2, 2]
  assert not _dots(module.entry_computation)
  args = _args(5, seed=3)
  want = HloEvaluator().evaluate(ct.parse(text), args)
  ct.assert_same(HloEvaluator().evaluate(module, args), want, rtol=1e-6,
                 atol=1e-6)


def test_compiled_scan_matches_the_evaluator():
  exe, _ = ct.run_and_compare(_scan(n=6, trip=6), _args(6, seed=2),
                              rtol=1e-4, atol=1e-5)
  # The hoisted product is a kernel of the entry, outside the loop.
  entry_kernels = [t["name"] for t in exe.plan["thunks"]
                   if t["kind"] == "kernel"]
  assert any(".rows" in name for name in entry_kernels), entry_kernels
