"""Tests for WhileLoopInvariantCodeMotion."""

from xla.hlo.transforms.simplifiers import (
    while_loop_invariant_code_motion as licm)
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _module(body_ops, out="x2", entry_root=None):
  """Loop state (i, x, y): i counts, x is updated with `out`, y is passed
  through unchanged (invariant)."""
  entry_root = entry_root or "ROOT r = f32[4] get-tuple-element(w), index=1"
  return f"""HloModule m

cond {{
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT c = pred[] compare(i, n), direction=LT
}}

body {{
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  y = f32[4] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  {body_ops}
  ROOT t = (s32[], f32[4], f32[4]) tuple(i2, {out}, y)
}}

ENTRY e {{
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  z = s32[] constant(0)
  t = (s32[], f32[4], f32[4]) tuple(z, a, b)
  w = (s32[], f32[4], f32[4]) while(t), condition=cond, body=body
  {entry_root}
}}
"""


def _check(text, expected, check_results=True, **kwargs):
  """Runs the pass on `text`, FileChecks the result against `expected`
  (None: nothing may change) and, unless told not to, evaluates both
  modules on the same random inputs."""
  return run_and_filecheck(text, licm.WhileLoopInvariantCodeMotion(**kwargs),
                           expected, check_results=check_results)


# The loop state (i, x, y) gained a fourth element, [[V]]: the body reads it
# as G and passes it through; nothing else in the body changed.
_BODY_READS_HOISTED = """
  CHECK:      body {
  CHECK-NEXT:   [[P:p[.0-9]*]] = (s32[], f32[4]{0}, f32[4]{0}, f32[4]{0}) parameter(0)
  CHECK-NEXT:   {{[a-z.0-9]+}} = s32[] get-tuple-element([[P]]), index=0
  CHECK-NEXT:   x = f32[4]{0} get-tuple-element([[P]]), index=1
  CHECK-NEXT:   y = f32[4]{0} get-tuple-element([[P]]), index=2
  CHECK-NEXT:   one = s32[] constant(1)
  CHECK-NEXT:   i2 = s32[] add({{.*}}, one)
  CHECK-NEXT:   [[G:[a-z.0-9-]+]] = f32[4]{0} get-tuple-element([[P]]), index=3
  CHECK-NEXT:   x2 = f32[4]{0} add(x, [[G]])
  CHECK-NEXT:   ROOT {{.*}} tuple(i2, x2, y, [[G]])
  CHECK-NEXT: }
"""

# Outside users still read element 1.
_ENTRY_PASSES_HOISTED = """
  CHECK:      [[T:[a-z.0-9]+]] = (s32[], f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(z, a, b, [[V]])
  CHECK-NEXT: [[W:while[.0-9]*]] = {{.*}} while([[T]]), condition=cond, body=body
  CHECK-NEXT: ROOT r = f32[4]{0} get-tuple-element([[W]]), index=1
"""


def test_invariant_exp_is_hoisted():
  _check(_module("""e = f32[4] exponential(y)
  x2 = f32[4] add(x, e)"""), _BODY_READS_HOISTED + """
  CHECK:      ENTRY e {
  CHECK:      [[V:[a-z.0-9]+]] = f32[4]{0} exponential(b)""" +
         _ENTRY_PASSES_HOISTED)


def test_chain_is_hoisted_with_cheap_operands():
  # Only the boundary value joins the loop state.
  _check(_module("""c = f32[] constant(2)
  bc = f32[4] broadcast(c), dimensions={}
  m = f32[4] multiply(y, bc)
  e = f32[4] exponential(m)
  x2 = f32[4] add(x, e)"""), _BODY_READS_HOISTED + """
  CHECK:      ENTRY e {
  CHECK:      [[C:[a-z.0-9]+]] = f32[] constant(2)
  CHECK-NEXT: [[BC:[a-z.0-9]+]] = f32[4]{0} broadcast([[C]])
  CHECK-NEXT: [[M:[a-z.0-9]+]] = f32[4]{0} multiply(b, [[BC]])
  CHECK-NEXT: [[V:[a-z.0-9]+]] = f32[4]{0} exponential([[M]])""" +
         _ENTRY_PASSES_HOISTED)


def test_variant_operand_blocks_hoisting():
  _check(_module("""e = f32[4] exponential(x)
  x2 = f32[4] add(x, e)"""), None)


def test_cheap_op_alone_is_not_hoisted():
  _check(_module("""r = f32[2,2] reshape(y)
  r2 = f32[4] reshape(r)
  x2 = f32[4] add(x, r2)"""), None)


def test_constants_only_with_flag():
  ops = """c = f32[4] constant({1, 2, 3, 4})
  x2 = f32[4] add(x, c)"""
  _check(_module(ops), None)
  _check(_module(ops), """
  CHECK-LABEL: ENTRY e {
  CHECK-DAG:   [[ONE:one[.0-9]*]] = s32[] constant(1)
  CHECK-DAG:   [[C:c[.0-9]*]] = f32[4]{0} constant({1, 2, 3, 4})
  CHECK:       tuple(z, a, b, [[ONE]], [[C]])""", hoist_constants=True)


def test_side_effecting_op_is_not_hoisted():
  _check(_module("""e = f32[4] rng(y, y), distribution=rng_uniform
  x2 = f32[4] add(x, e)"""), None, check_results=False)


def test_size_inflation_threshold():
  ops = """s = f32[] reduce(y, z0), dimensions={0}, to_apply=add_f32
  e = f32[] exponential(s)
  bc = f32[4] broadcast(e), dimensions={}
  x2 = f32[4] add(x, bc)"""
  text = _module(ops.replace("z0", "zero"))
  text = text.replace("  one = s32[] constant(1)",
                      "  one = s32[] constant(1)\n"
                      "  zero = f32[] constant(0)")
  text = text.replace("cond {", "add_f32 {\n  l = f32[] parameter(0)\n"
                      "  r = f32[] parameter(1)\n"
                      "  ROOT s = f32[] add(l, r)\n}\n\ncond {")
  # Default: the whole chain (ending in the broadcast) is hoisted.
  _check(text, """
  CHECK-LABEL: ENTRY e {
  CHECK:       [[B:[a-z.0-9]+]] = f32[4]{0} broadcast(
  CHECK:       tuple(z, a, b, [[B]])""")
  # Without size-inflating hoists: the broadcast (16 bytes from 16 bytes of
  # loop state) is fine at ratio 1; at ratio 0.5 it stays in the body and
  # only the scalar exponential (4 bytes) is hoisted.
  _check(text, """
  CHECK-LABEL: body {
  CHECK:       broadcast(
  CHECK-LABEL: ENTRY e {
  CHECK-NOT:   broadcast(
  CHECK:       [[E:[a-z.0-9]+]] = f32[] exponential(
  CHECK:       tuple(z, a, b, [[E]])""",
         hoist_size_inflating_ops=False, size_inflation_ratio=0.5)


def test_non_gte_user_of_loop_gets_original_tuple():
  text = _module("""e = f32[4] exponential(y)
  x2 = f32[4] add(x, e)""", entry_root=(
      "ROOT r = ((s32[], f32[4], f32[4])) tuple(w)"))
  _check(text, """
  CHECK:     [[W:while[.0-9]*]] = {{.*}} while(
  CHECK-DAG: [[G0:[a-z.0-9-]+]] = s32[] get-tuple-element([[W]]), index=0
  CHECK-DAG: [[G1:[a-z.0-9-]+]] = f32[4]{0} get-tuple-element([[W]]), index=1
  CHECK-DAG: [[G2:[a-z.0-9-]+]] = f32[4]{0} get-tuple-element([[W]]), index=2
  CHECK:     [[T:[a-z.0-9]+]] = (s32[], f32[4]{0}, f32[4]{0}) tuple([[G0]], [[G1]], [[G2]])
  CHECK:     ROOT r = {{.*}} tuple([[T]])""")
