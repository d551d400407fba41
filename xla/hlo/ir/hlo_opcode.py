"""The HLO opcodes (xla/hlo/ir/hlo_opcode.h): one sorted table.

Each row gives the enum name, the text name used in HLO text, the arity (None
for variadic) and the opcode's property set. Properties replace scattered
`if opcode in (...)` checks:

  UNARY / BINARY / TERNARY   fixed-arity elementwise math
  ELEMENTWISE                output element i depends only on input elements i
  COMMUTATIVE                binary and operand order does not matter
  COMPARISON                 produces PRED from a comparison
  TRANSCENDENTAL             evaluated with a polynomial / library call
  RESULT_ACCURACY            accepts the `result_accuracy=` attribute
  SIDE_EFFECTING             must not be removed or duplicated
  CONTROL_FLOW               calls computations that may allocate buffers
  COLLECTIVE                 communicates across replicas / partitions
  ASYNC                      the start / update / done of an async pair
  BITWISE                    operates on the bits of integers / preds
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Optional

import support

UNARY = "UNARY"
BINARY = "BINARY"
TERNARY = "TERNARY"
ELEMENTWISE = "ELEMENTWISE"
COMMUTATIVE = "COMMUTATIVE"
COMPARISON = "COMPARISON"
TRANSCENDENTAL = "TRANSCENDENTAL"
RESULT_ACCURACY = "RESULT_ACCURACY"
SIDE_EFFECTING = "SIDE_EFFECTING"
CONTROL_FLOW = "CONTROL_FLOW"
COLLECTIVE = "COLLECTIVE"
ASYNC = "ASYNC"
BITWISE = "BITWISE"

PROPERTIES = frozenset({
    UNARY, BINARY, TERNARY, ELEMENTWISE, COMMUTATIVE, COMPARISON,
    TRANSCENDENTAL, RESULT_ACCURACY, SIDE_EFFECTING, CONTROL_FLOW,
    COLLECTIVE, ASYNC, BITWISE,
})

VARIADIC = None

_U = (UNARY, ELEMENTWISE)
_T = (UNARY, ELEMENTWISE, TRANSCENDENTAL, RESULT_ACCURACY)
_B = (BINARY, ELEMENTWISE)
_BC = (BINARY, ELEMENTWISE, COMMUTATIVE)
_SE = (SIDE_EFFECTING,)
_COLL = (COLLECTIVE, SIDE_EFFECTING)

# (enum name, text name, arity, properties). Sorted by enum name, like XLA's
# HLO_OPCODE_LIST; `test_table_is_sorted` keeps it so.
_TABLE = (
    ("kAbs", "abs", 1, _U),
    ("kAcos", "acos", 1, _T),
    ("kAcosh", "acosh", 1, _T),
    ("kAdd", "add", 2, _BC),
    ("kAddDependency", "add-dependency", 2, ()),
    ("kAfterAll", "after-all", VARIADIC, ()),
    ("kAllGather", "all-gather", VARIADIC, _COLL),
    ("kAllGatherDone", "all-gather-done", 1, _COLL + (ASYNC,)),
    ("kAllGatherStart", "all-gather-start", VARIADIC, _COLL + (ASYNC,)),
    ("kAllReduce", "all-reduce", VARIADIC, _COLL),
    ("kAllReduceDone", "all-reduce-done", 1, _COLL + (ASYNC,)),
    ("kAllReduceStart", "all-reduce-start", VARIADIC, _COLL + (ASYNC,)),
    ("kAllToAll", "all-to-all", VARIADIC, _COLL),
    ("kAnd", "and", 2, _BC + (BITWISE,)),
    ("kAsin", "asin", 1, _T),
    ("kAsinh", "asinh", 1, _T),
    ("kAsyncDone", "async-done", 1, (ASYNC,)),
    ("kAsyncStart", "async-start", VARIADIC, (ASYNC,)),
    ("kAsyncUpdate", "async-update", VARIADIC, (ASYNC,)),
    ("kAtan", "atan", 1, _U + (TRANSCENDENTAL,)),
    ("kAtan2", "atan2", 2, _B + (TRANSCENDENTAL,)),
    ("kAtanh", "atanh", 1, _T),
    ("kBatchNormGrad", "batch-norm-grad", 5, ()),
    ("kBatchNormInference", "batch-norm-inference", 5, ()),
    ("kBatchNormTraining", "batch-norm-training", 3, ()),
    ("kBitcast", "bitcast", 1, ()),
    ("kBitcastConvert", "bitcast-convert", 1, (UNARY,)),
    ("kBroadcast", "broadcast", 1, ()),
    ("kCall", "call", VARIADIC, (CONTROL_FLOW,)),
    ("kCbrt", "cbrt", 1, _T),
    ("kCeil", "ceil", 1, _U),
    ("kCholesky", "cholesky", 1, ()),
    ("kClamp", "clamp", 3, (TERNARY, ELEMENTWISE)),
    ("kClz", "count-leading-zeros", 1, _U + (BITWISE,)),
    ("kCollectiveBroadcast", "collective-broadcast", VARIADIC, _COLL),
    ("kCollectivePermute", "collective-permute", VARIADIC, _COLL),
    ("kCollectivePermuteDone", "collective-permute-done", 1,
     _COLL + (ASYNC,)),
    ("kCollectivePermuteStart", "collective-permute-start", VARIADIC,
     _COLL + (ASYNC,)),
    ("kCollectiveReduce", "collective-reduce", VARIADIC, _COLL),
    ("kCompare", "compare", 2, _B + (COMPARISON,)),
    ("kComplex", "complex", 2, _B),
    ("kConcatenate", "concatenate", VARIADIC, ()),
    ("kConditional", "conditional", VARIADIC, (CONTROL_FLOW,)),
    ("kConstant", "constant", 0, ()),
    ("kConvert", "convert", 1, _U),
    ("kConvolution", "convolution", VARIADIC, ()),
    ("kCopy", "copy", 1, _U),
    ("kCopyDone", "copy-done", 1, (ASYNC,)),
    ("kCopyStart", "copy-start", 1, (ASYNC,)),
    ("kCos", "cosine", 1, _T),
    ("kCosh", "cosh", 1, _T),
    ("kCustomCall", "custom-call", VARIADIC, ()),
    ("kDivide", "divide", 2, _B),
    ("kDomain", "domain", 1, ()),
    ("kDot", "dot", 2, ()),
    ("kDynamicReshape", "dynamic-reshape", VARIADIC, ()),
    ("kDynamicSlice", "dynamic-slice", VARIADIC, ()),
    ("kDynamicUpdateSlice", "dynamic-update-slice", VARIADIC, ()),
    ("kErf", "erf", 1, _T),
    ("kExp", "exponential", 1, _T),
    ("kExpm1", "exponential-minus-one", 1, _T),
    ("kFft", "fft", 1, ()),
    ("kFloor", "floor", 1, _U),
    ("kFusion", "fusion", VARIADIC, ()),
    ("kGather", "gather", 2, ()),
    ("kGetDimensionSize", "get-dimension-size", 1, ()),
    ("kGetTupleElement", "get-tuple-element", 1, ()),
    ("kImag", "imag", 1, _U),
    ("kInfeed", "infeed", 1, _SE),
    ("kIota", "iota", 0, ()),
    ("kIsFinite", "is-finite", 1, _U),
    ("kLog", "log", 1, _T),
    ("kLog1p", "log-plus-one", 1, _T),
    ("kLogistic", "logistic", 1, _T),
    ("kMap", "map", VARIADIC, (ELEMENTWISE,)),
    ("kMaximum", "maximum", 2, _BC),
    ("kMinimum", "minimum", 2, _BC),
    ("kMulhi", "mulhi", 2, _BC),
    ("kMultiply", "multiply", 2, _BC),
    ("kNegate", "negate", 1, _U),
    ("kNot", "not", 1, _U + (BITWISE,)),
    ("kOptimizationBarrier", "opt-barrier", 1, ()),
    ("kOr", "or", 2, _BC + (BITWISE,)),
    ("kOutfeed", "outfeed", 2, _SE),
    ("kPad", "pad", 2, ()),
    ("kParameter", "parameter", 0, ()),
    ("kPartitionId", "partition-id", 0, ()),
    ("kPopulationCount", "popcnt", 1, _U + (BITWISE,)),
    ("kPower", "power", 2, _B + (TRANSCENDENTAL,)),
    ("kRaggedAllToAll", "ragged-all-to-all", 6, _COLL),
    ("kRaggedDot", "ragged-dot", 3, ()),
    ("kReal", "real", 1, _U),
    ("kRecv", "recv", 1, _SE),
    ("kRecvDone", "recv-done", 1, _SE),
    ("kReduce", "reduce", VARIADIC, ()),
    ("kReducePrecision", "reduce-precision", 1, _U),
    ("kReduceScatter", "reduce-scatter", VARIADIC, _COLL),
    ("kReduceWindow", "reduce-window", VARIADIC, ()),
    ("kRemainder", "remainder", 2, _B),
    ("kReplicaId", "replica-id", 0, ()),
    ("kReshape", "reshape", 1, ()),
    ("kReverse", "reverse", 1, ()),
    ("kRng", "rng", VARIADIC, _SE),
    ("kRngBitGenerator", "rng-bit-generator", 1, ()),
    ("kRngGetAndUpdateState", "rng-get-and-update-state", 0, _SE),
    ("kRoundNearestAfz", "round-nearest-afz", 1, _U),
    ("kRoundNearestEven", "round-nearest-even", 1, _U),
    ("kRsqrt", "rsqrt", 1, _T),
    ("kScaledDot", "scaled-dot", 4, ()),
    ("kScan", "scan", VARIADIC, ()),
    ("kScatter", "scatter", VARIADIC, ()),
    ("kSelect", "select", 3, (TERNARY, ELEMENTWISE)),
    ("kSelectAndScatter", "select-and-scatter", 3, ()),
    ("kSend", "send", 2, _SE),
    ("kSendDone", "send-done", 1, _SE),
    ("kSetDimensionSize", "set-dimension-size", 2, ()),
    ("kShiftLeft", "shift-left", 2, _B + (BITWISE,)),
    ("kShiftRightArithmetic", "shift-right-arithmetic", 2, _B + (BITWISE,)),
    ("kShiftRightLogical", "shift-right-logical", 2, _B + (BITWISE,)),
    ("kShuffle", "shuffle", 1, ()),
    ("kSign", "sign", 1, _U),
    ("kSin", "sine", 1, _T),
    ("kSinh", "sinh", 1, _T),
    ("kSlice", "slice", 1, ()),
    ("kSort", "sort", VARIADIC, ()),
    ("kSqrt", "sqrt", 1, _T),
    ("kStochasticConvert", "stochastic-convert", 2, _B),
    ("kSubtract", "subtract", 2, _B),
    ("kTan", "tan", 1, _T),
    ("kTanh", "tanh", 1, _T),
    ("kTopK", "topk", 1, ()),
    ("kTranspose", "transpose", 1, ()),
    ("kTriangularSolve", "triangular-solve", 2, ()),
    ("kTuple", "tuple", VARIADIC, ()),
    ("kWhile", "while", 1, (CONTROL_FLOW,)),
    ("kXor", "xor", 2, _BC + (BITWISE,)),
)

HloOpcode = enum.Enum("HloOpcode", [(row[0], row[1]) for row in _TABLE])
HloOpcode.__doc__ = """An HLO opcode; `.value` is its HLO text name."""
# Members are singletons compared by identity, so hash them by identity too:
# Enum's own __hash__ (a Python-level hash of the member name) was a tenth
# of the HLO pass time, spent in opcode-keyed table look-ups.
HloOpcode.__hash__ = object.__hash__


@dataclasses.dataclass(frozen=True)
class OpcodeInfo:
  opcode: HloOpcode
  name: str
  arity: Optional[int]
  properties: frozenset[str]


INFO: dict[HloOpcode, OpcodeInfo] = {
    HloOpcode[enum_name]: OpcodeInfo(HloOpcode[enum_name], text, arity,
                                     frozenset(props))
    for enum_name, text, arity, props in _TABLE
}

_BY_NAME = {info.name: op for op, info in INFO.items()}


def opcode_string(opcode: HloOpcode) -> str:
  return INFO[opcode].name


def string_to_opcode(name: str) -> HloOpcode:
  """The opcode named `name`; NotFoundError if there is none."""
  try:
    return _BY_NAME[name]
  except KeyError:
    raise support.NotFoundError(f"Unknown opcode: {name}") from None


def is_opcode_name(name: str) -> bool:
  return name in _BY_NAME


def arity(opcode: HloOpcode) -> Optional[int]:
  """The operand count, or None for variadic opcodes."""
  return INFO[opcode].arity


def is_variadic(opcode: HloOpcode) -> bool:
  return INFO[opcode].arity is None


def has_property(opcode: HloOpcode, prop: str) -> bool:
  return prop in INFO[opcode].properties


def opcodes_with(prop: str) -> frozenset[HloOpcode]:
  return frozenset(op for op, info in INFO.items() if prop in info.properties)


def is_elementwise(opcode: HloOpcode) -> bool:
  return ELEMENTWISE in INFO[opcode].properties


def is_binary_commutative(opcode: HloOpcode) -> bool:
  return COMMUTATIVE in INFO[opcode].properties


def is_async(opcode: HloOpcode) -> bool:
  return opcode in (HloOpcode.kAsyncStart, HloOpcode.kAsyncUpdate,
                    HloOpcode.kAsyncDone)


def opcode_count() -> int:
  return len(_TABLE)
