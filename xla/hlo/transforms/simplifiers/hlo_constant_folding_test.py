"""Tests for HloConstantFolding (uses the HLO evaluator)."""

import pytest

from xla.hlo.transforms.simplifiers import hlo_constant_folding as hcf
from xla.hlo.transforms.simplifiers.pass_test_util import entry_module
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _check(body, expected, **kwargs):
  """Folds ENTRY { body }; FileChecks the result against `expected` (None:
  nothing may change)."""
  return run_and_filecheck(entry_module(body), hcf.HloConstantFolding(**kwargs),
                           expected)


def test_add_of_constants_folds():
  # The root is the folded constant and the only instruction left.
  _check("""a = s32[3] constant({1, 2, 3})
  b = s32[3] constant({10, 20, 30})
  ROOT r = s32[3] add(a, b)""", """
  CHECK:      ENTRY e {
  CHECK-NEXT:   ROOT {{.*}} = s32[3]{0} constant({11, 22, 33})
  CHECK-NEXT: }""")


def test_chain_folds_in_one_run():
  _check("""a = f32[2,2] constant({{1, 2}, {3, 4}})
  t = f32[2,2] transpose(a), dimensions={1,0}
  n = f32[2,2] negate(t)
  ROOT r = f32[4] reshape(n)""", """
  CHECK:      ENTRY e {
  CHECK-NEXT:   ROOT {{.*}} = f32[4]{0} constant({-1, -3, -2, -4})
  CHECK-NEXT: }""")


def test_partial_fold_keeps_parameter_use():
  _check("""p = f32[2] parameter(0)
  a = f32[2] constant({1, 2})
  b = f32[2] constant({3, 4})
  m = f32[2] multiply(a, b)
  ROOT r = f32[2] add(p, m)""", """
  CHECK:     p = f32[2]{0} parameter(0)
  CHECK-DAG: [[C:[a-z.0-9]+]] = f32[2]{0} constant({3, 8})
  CHECK:     ROOT r = f32[2]{0} add(p, [[C]])
  CHECK-NOT: multiply""")


NEGATIVE = [
    ("parameter_operand", """p = f32[2] parameter(0)
  a = f32[2] constant({1, 2})
  ROOT r = f32[2] add(p, a)"""),
    ("broadcast_of_constant", """a = f32[] constant(1)
  ROOT r = f32[100] broadcast(a), dimensions={}"""),
    ("iota", """ROOT r = s32[4] iota(), iota_dimension=0"""),
    ("tuple", """a = f32[] constant(1)
  ROOT r = (f32[]) tuple(a)"""),
    ("rng_side_effect", """a = f32[] constant(0)
  b = f32[] constant(1)
  ROOT r = f32[4] rng(a, b), distribution=rng_uniform"""),
]


@pytest.mark.parametrize("name,body", NEGATIVE, ids=[n for n, _ in NEGATIVE])
def test_does_not_fold(name, body):
  _check(body, None)


def test_max_elements_limits_growth():
  body = """a = f32[2] constant({1, 2})
  b = f32[3] constant({3, 4, 5})
  ROOT r = f32[5] concatenate(a, b), dimensions={0}"""
  folded = "CHECK: ROOT {{.*}} = f32[5]{0} constant({1, 2, 3, 4, 5})"
  _check(body, folded)
  # 5 elements from 5: not a growth, folded even with a tiny limit.
  _check(body, folded, max_elements=1)
  pad = """a = f32[2] constant({1, 2})
  z = f32[] constant(0)
  ROOT r = f32[10] pad(a, z), padding=0_8"""
  _check(pad, "CHECK: ROOT {{.*}} = f32[10]{0} constant({1, 2, 0, 0, 0, 0, "
              "0, 0, 0, 0})")
  _check(pad, None, max_elements=4)
