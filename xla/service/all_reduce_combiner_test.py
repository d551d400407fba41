"""AllReduceCombiner: which all-reduces combine, and that a combined one
still computes the same sums on the CPU backend's participants."""

import numpy as np
import pytest

from xla.hlo.parser import hlo_parser
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck
from xla.service import all_reduce_combiner as arc
from xla.service import hlo_verifier

_ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
add.2 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT z = f32[] add(y, x)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}
"""


def _module(body: str, partitions: int = 2) -> str:
  return (f"HloModule m, num_partitions={partitions}\n{_ADD}\n"
          f"ENTRY e {{\n{body}\n}}")


_AR = ("replica_groups={{0,1}}, use_global_device_ids=true, "
       "to_apply=")


def test_independent_all_reduces_combine():
  text = _module(f"""
  p = f32[4] parameter(0)
  q = f32[2,3] parameter(1)
  r0 = f32[4] all-reduce(p), channel_id=1, {_AR}add
  r1 = f32[2,3] all-reduce(q), channel_id=2, {_AR}add.2
  ROOT t = (f32[4], f32[2,3]) tuple(r0, r1)""")
  _, module = run_and_filecheck(text, arc.AllReduceCombiner(), """
CHECK: [[AR:[^ ]+]] = (f32[4]{0}, f32[2,3]{1,0}) all-reduce(p, q), channel_id=1
CHECK-DAG: get-tuple-element([[AR]]), index=0
CHECK-DAG: get-tuple-element([[AR]]), index=1
""")
  ops = [i.opcode.value for i in module.entry_computation.instructions]
  assert ops.count("all-reduce") == 1


def test_dependent_all_reduces_stay_apart():
  text = _module(f"""
  p = f32[4] parameter(0)
  r0 = f32[4] all-reduce(p), channel_id=1, {_AR}add
  n = f32[4] negate(r0)
  r1 = f32[4] all-reduce(n), channel_id=2, {_AR}add
  ROOT t = (f32[4], f32[4]) tuple(r0, r1)""")
  run_and_filecheck(text, arc.AllReduceCombiner(), None)


@pytest.mark.parametrize("second", [
    f"f32[4] all-reduce(q), channel_id=2, {_AR}max",   # another reduction
    "f32[4] all-reduce(q), channel_id=2, replica_groups={{0},{1}}, "
    "use_global_device_ids=true, to_apply=add",        # other groups
    f"f32[4] all-reduce(q), {_AR}add",                 # no channel id
])
def test_incompatible_all_reduces_stay_apart(second):
  text = _module(f"""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  r0 = f32[4] all-reduce(p), channel_id=1, {_AR}add
  r1 = {second}
  ROOT t = (f32[4], f32[4]) tuple(r0, r1)""")
  run_and_filecheck(text, arc.AllReduceCombiner(), None)


def test_element_types_combine_separately():
  text = (f"HloModule m, num_partitions=2\n{_ADD}\n"
          "addi {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
          "  ROOT c = s32[] add(a, b)\n}\n" + f"""ENTRY e {{
  p = f32[4] parameter(0)
  q = s32[4] parameter(1)
  s = f32[4] parameter(2)
  r0 = f32[4] all-reduce(p), channel_id=1, {_AR}add
  r1 = s32[4] all-reduce(q), channel_id=2, {_AR}addi
  r2 = f32[4] all-reduce(s), channel_id=3, {_AR}add
  ROOT t = (f32[4], s32[4], f32[4]) tuple(r0, r1, r2)
}}""")
  _, module = run_and_filecheck(text, arc.AllReduceCombiner(), """
CHECK-DAG: (f32[4]{0}, f32[4]{0}) all-reduce(p, s)
CHECK-DAG: s32[4]{0} all-reduce(q)
""")
  del module


def test_groups_that_would_depend_on_each_other_are_not_both_formed():
  # r0 feeds r3 (through n) and r2 feeds r1: combining {r0, r1} (add) and
  # {r2, r3} (max) would make each combined all-reduce wait on the other.
  text = _module(f"""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  r0 = f32[4] all-reduce(p), channel_id=1, {_AR}add
  r2 = f32[4] all-reduce(q), channel_id=3, {_AR}max
  m = f32[4] negate(r2)
  r1 = f32[4] all-reduce(m), channel_id=2, {_AR}add
  n = f32[4] negate(r0)
  r3 = f32[4] all-reduce(n), channel_id=4, {_AR}max
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(r0, r1, r2, r3)""")
  module = hlo_parser.parse_and_return_verified_module(text)
  assert arc.AllReduceCombiner().run(module)
  hlo_verifier.verify(module)
  # The order must still exist (no cycle) and one group was formed.
  module.entry_computation.instructions_in_stable_order()
  ars = [i for i in module.entry_computation.instructions
         if i.opcode.value == "all-reduce"]
  assert len(ars) == 3


def test_thresholds():
  body = f"""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  s = f32[4] parameter(2)
  r0 = f32[4] all-reduce(p), channel_id=1, {_AR}add
  r1 = f32[4] all-reduce(q), channel_id=2, {_AR}add
  r2 = f32[4] all-reduce(s), channel_id=3, {_AR}add
  ROOT t = (f32[4], f32[4], f32[4]) tuple(r0, r1, r2)"""
  run_and_filecheck(_module(body), arc.AllReduceCombiner(threshold_count=2),
                    """
CHECK-DAG: (f32[4]{0}, f32[4]{0}) all-reduce(p, q)
CHECK-DAG: f32[4]{0} all-reduce(s)
""")
  run_and_filecheck(_module(body), arc.AllReduceCombiner(threshold_bytes=16),
                    None)


def test_all_reduces_in_a_loop_body_combine():
  text = (f"HloModule m, num_partitions=2\n{_ADD}\n" + f"""
body {{
  t = (f32[4], f32[4]) parameter(0)
  x0 = f32[4] get-tuple-element(t), index=0
  x1 = f32[4] get-tuple-element(t), index=1
  ra = f32[4] all-reduce(x0), channel_id=1, {_AR}add
  rb = f32[4] all-reduce(x1), channel_id=2, {_AR}add
  ROOT u = (f32[4], f32[4]) tuple(ra, rb)
}}
cond {{
  t = (f32[4], f32[4]) parameter(0)
  ROOT f = pred[] constant(false)
}}
ENTRY e {{
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  i = (f32[4], f32[4]) tuple(p, q)
  ROOT w = (f32[4], f32[4]) while(i), condition=cond, body=body
}}""")
  run_and_filecheck(text, arc.AllReduceCombiner(), """
CHECK: body
CHECK: (f32[4]{0}, f32[4]{0}) all-reduce(x0, x1)
""")


def test_combined_all_reduce_runs_on_two_partitions():
  from xla.service.cpu import cpu_testing as ct  # pylint: disable=g-import-not-at-top
  text = _module(f"""
  p = f32[4] parameter(0)
  q = f32[2,3] parameter(1)
  r0 = f32[4] all-reduce(p), channel_id=1, {_AR}add
  r1 = f32[2,3] all-reduce(q), channel_id=2, {_AR}add.2
  ROOT t = (f32[4], f32[2,3]) tuple(r0, r1)""")
  module = hlo_parser.parse_and_return_verified_module(text)
  assert arc.AllReduceCombiner().run(module)
  rng = np.random.default_rng(0)
  args = [[rng.standard_normal(4).astype(np.float32),
           rng.standard_normal((2, 3)).astype(np.float32)]
          for _ in range(2)]
  _, exe = ct.compile_text(module.to_string())
  outs = exe.execute_spmd(args)
  for out in outs:
    np.testing.assert_allclose(out[0], args[0][0] + args[1][0], rtol=1e-6)
    np.testing.assert_allclose(out[1], args[0][1] + args[1][1], rtol=1e-6)
