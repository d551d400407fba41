"""Tests for the HLO opcode table."""

import pytest

import support
from xla.hlo.ir import hlo_opcode as ho
from xla.hlo.ir.hlo_opcode import HloOpcode as O


def test_table_is_sorted_and_unique():
  names = [op.name for op in O]
  assert names == sorted(names)
  texts = [op.value for op in O]
  assert len(set(texts)) == len(texts) == ho.opcode_count()


def test_every_opcode_of_xla():
  # The opcodes of XLA's HLO_OPCODE_LIST, by text name.
  expected = """abs acos acosh add add-dependency after-all all-gather
      all-gather-done all-gather-start all-reduce all-reduce-done
      all-reduce-start all-to-all and asin asinh async-done async-start
      async-update atan atan2 atanh batch-norm-grad batch-norm-inference
      batch-norm-training bitcast bitcast-convert broadcast call cbrt ceil
      cholesky clamp count-leading-zeros collective-broadcast
      collective-permute collective-permute-done collective-permute-start
      collective-reduce compare complex concatenate conditional constant
      convert convolution copy copy-done copy-start cosine cosh custom-call
      divide domain dot dynamic-reshape dynamic-slice dynamic-update-slice
      erf exponential exponential-minus-one fft floor fusion gather
      get-dimension-size get-tuple-element imag infeed iota is-finite log
      log-plus-one logistic map maximum minimum mulhi multiply negate not
      opt-barrier or outfeed pad parameter partition-id popcnt power
      ragged-all-to-all ragged-dot real recv recv-done reduce
      reduce-precision reduce-scatter reduce-window remainder replica-id
      reshape reverse rng rng-bit-generator rng-get-and-update-state
      round-nearest-afz round-nearest-even rsqrt scaled-dot scan scatter
      select select-and-scatter send send-done set-dimension-size shift-left
      shift-right-arithmetic shift-right-logical shuffle sign sine sinh
      slice sort sqrt stochastic-convert subtract tan tanh topk transpose
      triangular-solve tuple while xor""".split()
  assert sorted(op.value for op in O) == sorted(expected)


@pytest.mark.parametrize("opcode,arity", [
    (O.kAdd, 2), (O.kAbs, 1), (O.kSelect, 3), (O.kConstant, 0),
    (O.kTuple, None), (O.kBatchNormGrad, 5), (O.kRaggedAllToAll, 6),
    (O.kScaledDot, 4), (O.kWhile, 1), (O.kOutfeed, 2),
])
def test_arity(opcode, arity):
  assert ho.arity(opcode) == arity
  assert ho.is_variadic(opcode) == (arity is None)


def test_lookup():
  assert ho.string_to_opcode("exponential") == O.kExp
  assert ho.opcode_string(O.kClz) == "count-leading-zeros"
  assert ho.opcode_string(O.kOptimizationBarrier) == "opt-barrier"
  with pytest.raises(support.NotFoundError, match="frobnicate"):
    ho.string_to_opcode("frobnicate")


def test_property_sets():
  assert ho.opcodes_with(ho.COMMUTATIVE) == {
      O.kAdd, O.kMultiply, O.kMulhi, O.kMaximum, O.kMinimum, O.kAnd, O.kOr,
      O.kXor}
  assert ho.opcodes_with(ho.COMPARISON) == {O.kCompare}
  assert ho.is_elementwise(O.kSelect) and ho.is_elementwise(O.kConvert)
  assert not ho.is_elementwise(O.kDot) and not ho.is_elementwise(O.kReduce)
  assert ho.has_property(O.kSend, ho.SIDE_EFFECTING)
  assert ho.has_property(O.kAllReduce, ho.COLLECTIVE)
  assert ho.is_async(O.kAsyncStart) and not ho.is_async(O.kCopyStart)
  for op in ho.opcodes_with(ho.BINARY):
    assert ho.arity(op) == 2
  for op in ho.opcodes_with(ho.UNARY):
    assert ho.arity(op) == 1
  for op in O:
    assert ho.INFO[op].properties <= ho.PROPERTIES
