"""Tests for AlgebraicSimplifier: each rule fires on its pattern (positive)
and leaves a near miss alone (negative)."""

import numpy as np
import pytest

from xla.hlo.evaluator.hlo_evaluator import HloEvaluator
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import algebraic_simplifier as algsimp
from xla.hlo.transforms.simplifiers.pass_test_util import entry_module
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _check(body, expected, **kwargs):
  """Runs the simplifier on ENTRY { body }; FileChecks the result against
  `expected` (None: nothing may change)."""
  return run_and_filecheck(entry_module(body),
                           algsimp.AlgebraicSimplifier(**kwargs), expected)


# (name, body, expected root name) where the rule fires: the root becomes
# the named instruction.
POSITIVE = [
    ("add_rhs_zero", """p = f32[4] parameter(0)
  z = f32[4] constant({0, 0, 0, 0})
  ROOT r = f32[4] add(p, z)""", "p"),
    ("add_lhs_zero_broadcast", """p = s32[2,3] parameter(0)
  z = s32[] constant(0)
  b = s32[2,3] broadcast(z), dimensions={}
  ROOT r = s32[2,3] add(b, p)""", "p"),
    ("sub_zero", """p = f32[4] parameter(0)
  z = f32[] constant(0)
  b = f32[4] broadcast(z), dimensions={}
  ROOT r = f32[4] subtract(p, b)""", "p"),
    ("mul_one", """p = f32[4] parameter(0)
  o = f32[4] constant({1, 1, 1, 1})
  ROOT r = f32[4] multiply(p, o)""", "p"),
    ("mul_lhs_one", """p = bf16[4] parameter(0)
  o = bf16[] constant(1)
  b = bf16[4] broadcast(o), dimensions={}
  ROOT r = bf16[4] multiply(b, p)""", "p"),
    ("mul_zero_int", """p = s32[4] parameter(0)
  z = s32[4] constant({0, 0, 0, 0})
  ROOT r = s32[4] multiply(p, z)""", "z"),
    ("mul_lhs_zero_uint", """p = u8[4] parameter(0)
  z = u8[4] constant({0, 0, 0, 0})
  ROOT r = u8[4] multiply(z, p)""", "z"),
    ("neg_neg", """p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT r = f32[4] negate(n)""", "p"),
    ("reshape_noop", """p = f32[2,3] parameter(0)
  ROOT r = f32[2,3] reshape(p)""", "p"),
    ("reshape_reshape_back", """p = f32[2,3] parameter(0)
  a = f32[6] reshape(p)
  ROOT r = f32[2,3] reshape(a)""", "p"),
    ("transpose_identity", """p = f32[2,3] parameter(0)
  ROOT r = f32[2,3] transpose(p), dimensions={0,1}""", "p"),
    ("transpose_transpose_back", """p = f32[2,3,4] parameter(0)
  a = f32[4,2,3] transpose(p), dimensions={2,0,1}
  ROOT r = f32[2,3,4] transpose(a), dimensions={1,2,0}""", "p"),
    ("broadcast_noop", """p = f32[2,3] parameter(0)
  ROOT r = f32[2,3] broadcast(p), dimensions={0,1}""", "p"),
    ("slice_full", """p = f32[4,5] parameter(0)
  ROOT r = f32[4,5] slice(p), slice={[0:4], [0:5]}""", "p"),
    ("convert_same_type", """p = s32[4] parameter(0)
  ROOT r = s32[4] convert(p)""", "p"),
    ("concat_one", """p = f32[4] parameter(0)
  ROOT r = f32[4] concatenate(p), dimensions={0}""", "p"),
]

# Near misses: the rule must not fire, nothing changes.
NEGATIVE = [
    ("add_nonzero", """p = f32[4] parameter(0)
  z = f32[4] constant({0, 0, 1, 0})
  ROOT r = f32[4] add(p, z)"""),
    ("add_parameter", """p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  ROOT r = f32[4] add(p, q)"""),
    ("sub_zero_lhs", """p = f32[4] parameter(0)
  z = f32[4] constant({0, 0, 0, 0})
  ROOT r = f32[4] subtract(z, p)"""),
    ("mul_two", """p = f32[4] parameter(0)
  o = f32[] constant(2)
  b = f32[4] broadcast(o), dimensions={}
  ROOT r = f32[4] multiply(p, b)"""),
    ("mul_zero_float", """p = f32[4] parameter(0)
  z = f32[4] constant({0, 0, 0, 0})
  ROOT r = f32[4] multiply(p, z)"""),
    ("single_neg", """p = f32[4] parameter(0)
  n = f32[4] exponential(p)
  ROOT r = f32[4] negate(n)"""),
    ("reshape_of_param", """p = f32[2,3] parameter(0)
  ROOT r = f32[3,2] reshape(p)"""),
    ("transpose_real", """p = f32[2,3] parameter(0)
  ROOT r = f32[3,2] transpose(p), dimensions={1,0}"""),
    ("broadcast_real", """p = f32[3] parameter(0)
  ROOT r = f32[2,3] broadcast(p), dimensions={1}"""),
    ("broadcast_scalar_constant_kept", """c = f32[] constant(0)
  ROOT r = f32[2,3] broadcast(c), dimensions={}"""),
    ("slice_partial", """p = f32[4,5] parameter(0)
  ROOT r = f32[4,4] slice(p), slice={[0:4], [1:5]}"""),
    ("slice_strided", """p = f32[4,5] parameter(0)
  ROOT r = f32[2,5] slice(p), slice={[0:4:2], [0:5]}"""),
    ("convert_other_type", """p = s32[4] parameter(0)
  ROOT r = f32[4] convert(p)"""),
    ("concat_two", """p = f32[4] parameter(0)
  ROOT r = f32[8] concatenate(p, p), dimensions={0}"""),
]


@pytest.mark.parametrize("name,body,expected", POSITIVE,
                         ids=[c[0] for c in POSITIVE])
def test_rule_fires(name, body, expected):
  # The root becomes the named instruction; the replaced one is gone.
  _check(body, f"""CHECK: ENTRY
                   CHECK-NOT: ROOT r =
                   CHECK: ROOT {expected} =
                   CHECK-NOT: ROOT r =""")


@pytest.mark.parametrize("name,body", NEGATIVE, ids=[c[0] for c in NEGATIVE])
def test_rule_does_not_fire(name, body):
  _check(body, None)


def test_every_handled_opcode_has_positive_and_negative_case():
  ops = {"add": HloOpcode.kAdd, "sub": HloOpcode.kSubtract,
         "mul": HloOpcode.kMultiply, "neg": HloOpcode.kNegate,
         "reshape": HloOpcode.kReshape, "transpose": HloOpcode.kTranspose,
         "broadcast": HloOpcode.kBroadcast, "slice": HloOpcode.kSlice,
         "convert": HloOpcode.kConvert, "concat": HloOpcode.kConcatenate}
  pos = {ops[c[0].split("_")[0]] for c in POSITIVE}
  neg = {ops[c[0].split("_")[0]] for c in NEGATIVE if c[0].split("_")[0] in ops}
  neg.add(HloOpcode.kNegate)  # "single_neg"
  assert algsimp.handled_opcodes() == pos
  assert algsimp.handled_opcodes() <= neg


def test_reshape_of_reshape_merges():
  _check("""p = f32[2,3] parameter(0)
  a = f32[6] reshape(p)
  ROOT r = f32[3,2] reshape(a)""", """
  CHECK:      p = f32[2,3]{1,0} parameter(0)
  CHECK-NEXT: ROOT {{.*}} = f32[3,2]{1,0} reshape(p)
  CHECK-NEXT: }""")


def test_transpose_of_transpose_composes():
  # p: [2,3,4]; a = transpose {1,2,0} -> [3,4,2]; r = transpose {1,0,2} of a
  # -> [4,3,2]; r dim i is p dim [1,2,0][[1,0,2][i]] = p dims (2,1,0).
  _check("""p = f32[2,3,4] parameter(0)
  a = f32[3,4,2] transpose(p), dimensions={1,2,0}
  ROOT r = f32[4,3,2] transpose(a), dimensions={1,0,2}""", """
  CHECK:      p = f32[2,3,4]{2,1,0} parameter(0)
  CHECK-NEXT: ROOT {{.*}} = f32[4,3,2]{2,1,0} transpose(p), dimensions={2,1,0}
  CHECK-NEXT: }""")


def test_broadcast_of_broadcast_composes():
  # p: [3] -> a: [3,5] dims {0} -> r: [2,3,5] dims {1,2}: p lands in dim 1.
  _check("""p = f32[3] parameter(0)
  a = f32[3,5] broadcast(p), dimensions={0}
  ROOT r = f32[2,3,5] broadcast(a), dimensions={1,2}""", """
  CHECK:      p = f32[3]{0} parameter(0)
  CHECK-NEXT: ROOT {{.*}} = f32[2,3,5]{2,1,0} broadcast(p), dimensions={1}
  CHECK-NEXT: }""")


def test_chain_folds_in_one_run_and_removes_dead_operands():
  _check("""p = f32[4] parameter(0)
  n1 = f32[4] negate(p)
  n2 = f32[4] negate(n1)
  n3 = f32[4] negate(n2)
  n4 = f32[4] negate(n3)
  z = f32[] constant(0)
  b = f32[4] broadcast(z), dimensions={}
  ROOT r = f32[4] add(n4, b)""", """
  CHECK:      ENTRY e {
  CHECK-NEXT:   ROOT p = f32[4]{0} parameter(0)
  CHECK-NEXT: }""")


def test_mul_zero_pred():
  _check("""p = pred[4] parameter(0)
  z = pred[] constant(false)
  b = pred[4] broadcast(z), dimensions={}
  ROOT r = pred[4] multiply(p, b)""", """
  CHECK:     z = pred[] constant(false)
  CHECK:     ROOT b = pred[4]{0} broadcast(z)
  CHECK-NOT: multiply""")


def test_layout_sensitive_keeps_layout_changing_reshape():
  body = """p = f32[2,3]{0,1} parameter(0)
  ROOT r = f32[2,3]{1,0} reshape(p)"""
  _check(body, None, is_layout_sensitive=True)
  _check(body, """CHECK: ROOT p = f32[2,3]{0,1} parameter(0)
                  CHECK-NOT: reshape""")


def test_nan_splat_is_not_one():
  _check("""p = f32[2] parameter(0)
  c = f32[2] constant({nan, nan})
  ROOT r = f32[2] multiply(p, c)""", None)


def test_splat_value():
  m = hp.parse_and_return_verified_module("""HloModule m
ENTRY e {
  a = s32[3] constant({7, 7, 7})
  b = s32[3] constant({7, 8, 7})
  c = s32[] constant(7)
  d = s32[2,3] broadcast(c), dimensions={}
  ROOT t = (s32[3], s32[3], s32[2,3]) tuple(a, b, d)
}""")
  get = m.entry_computation.get_instruction_with_name
  assert algsimp.splat_value(get("a")) == 7
  assert algsimp.splat_value(get("b")) is None
  assert algsimp.splat_value(get("d")) == 7
  assert algsimp.splat_value(get("t")) is None


def test_transpose_of_matrix_product_swaps_the_operands():
  # d = a^T x (contracting dim 0 of both), as jax's gradients spell it;
  # transpose(d) = x^T a.
  body = """a = f32[5,3] parameter(0)
  x = f32[5,4] parameter(1)
  d = f32[3,4] dot(a, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, operand_precision={high,default}
  ROOT r = f32[4,3] transpose(d), dimensions={1,0}"""
  _check(body, """
  CHECK:     ROOT {{.*}} = f32[4,3]{1,0} dot(x, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}, operand_precision={default,high}
  CHECK-NOT: transpose""")
  rng = np.random.default_rng(0)
  args = [rng.standard_normal((5, 3)).astype(np.float32),
          rng.standard_normal((5, 4)).astype(np.float32)]
  module = hp.parse_and_return_verified_module(
      f"HloModule m\nENTRY e {{\n{body}\n}}")
  want = HloEvaluator().evaluate(module, args)[0]
  algsimp.AlgebraicSimplifier().run(module)
  got = HloEvaluator().evaluate(module, args)[0]
  np.testing.assert_allclose(got, want, rtol=1e-6)
  np.testing.assert_allclose(got, args[1].T @ args[0], rtol=1e-5)


@pytest.mark.parametrize("body", [
    # The dot has another user: swapping would compute it twice.
    """a = f32[3,5] parameter(0)
  b = f32[5,4] parameter(1)
  d = f32[3,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,3] transpose(d), dimensions={1,0}
  n = f32[3,4] negate(d)
  ROOT r = (f32[4,3], f32[3,4]) tuple(t, n)""",
    # A batched product.
    """a = f32[2,3,5] parameter(0)
  b = f32[2,5,4] parameter(1)
  d = f32[2,3,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  ROOT r = f32[2,4,3] transpose(d), dimensions={0,2,1}""",
], ids=["shared_dot", "batched"])
def test_transpose_of_dot_left_alone(body):
  _check(body, None)
