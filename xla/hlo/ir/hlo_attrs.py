"""The attributes each HLO opcode carries, as one table.

An instruction keeps its opcode-specific attributes in a dict keyed by the
names HLO text uses (`dimensions`, `to_apply`, `window`, ...). `OPCODE_ATTRS`
lists, per opcode, the attributes it accepts in the order XLA prints them;
the parser, printer, verifier and accessors all read this one table.

Value types per kind:
  BOOL bool · INT int · FLOAT float · STRING str · INT_LIST tuple[int] ·
  INT_LIST_LIST tuple[tuple[int]] · ENUM an enum member (or str for open
  enums) · COMPUTATION HloComputation · COMPUTATION_LIST tuple of those ·
  WINDOW Window · DIM_LABELS ConvolutionDimensionNumbers · SLICE_RANGES
  tuple[(start, limit, stride)] · PADDING_CONFIG PaddingConfig ·
  PRECISION_LIST tuple[Precision] · SHAPE Shape · SHAPE_LIST tuple[Shape] ·
  LITERAL Literal · ALIASING tuple[OutputOperandAliasing] · REPLICA_GROUPS
  tuple[tuple[int]] or IotaReplicaGroupList · RAW RawText (kept verbatim).

Attributes every instruction may carry (metadata, sharding, backend_config,
...) are fields of the instruction, listed in `COMMON_ATTRS`.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Callable, Optional

from xla import xla_data
from xla.hlo.ir.hlo_opcode import HloOpcode


class AttrKind(enum.Enum):
  BOOL = "bool"
  INT = "int"
  FLOAT = "float"
  STRING = "string"
  INT_LIST = "int list"
  INT_LIST_LIST = "int list list"
  ENUM = "enum"
  COMPUTATION = "computation"
  COMPUTATION_LIST = "computation list"
  WINDOW = "window"
  DIM_LABELS = "dim labels"
  SLICE_RANGES = "slice ranges"
  PADDING_CONFIG = "padding config"
  PRECISION_LIST = "precision list"
  SHAPE = "shape"
  SHAPE_LIST = "shape list"
  LITERAL = "literal"
  ALIASING = "output operand aliasing"
  REPLICA_GROUPS = "replica groups"
  RAW = "raw"
  # Kinds of the common attributes only.
  FRONTEND_ATTRIBUTES = "frontend attributes"
  METADATA = "metadata"
  INSTRUCTION_LIST = "instruction list"
  BOOL_LIST = "bool list"
  STRING_OR_DICT = "string or dict"


@dataclasses.dataclass(frozen=True)
class RawText:
  """An attribute value kept as its exact source text (e.g. a sharding)."""

  text: str

  def __str__(self) -> str:
    return self.text


class FusionKind(enum.Enum):
  kLoop = "kLoop"
  kInput = "kInput"
  kOutput = "kOutput"
  kCustom = "kCustom"


@dataclasses.dataclass(frozen=True)
class EnumText:
  """Spelling of an enum's members in HLO text."""

  members: tuple[Any, ...]
  spell: Callable[[Any], str]

  def text(self, member) -> str:
    return self.spell(member)

  def parse(self, text: str):
    for m in self.members:
      if self.spell(m) == text:
        return m
    return None

  def spellings(self) -> list[str]:
    return [self.spell(m) for m in self.members]


def _enum(cls, spell=lambda m: m.name, skip=()):
  return EnumText(tuple(m for m in cls if m.name not in skip), spell)


FUSION_KIND = _enum(FusionKind, lambda m: m.value)
DIRECTION = _enum(xla_data.ComparisonDirection)
COMPARISON_TYPE = _enum(xla_data.ComparisonType, lambda m: m.value)
FFT_TYPE = _enum(xla_data.FftType)
DISTRIBUTION = _enum(xla_data.RandomDistribution, lambda m: m.name.lower(),
                     skip=("RNG_INVALID",))
RNG_ALGORITHM = _enum(xla_data.RandomAlgorithm, lambda m: m.name.lower())
PRECISION = _enum(xla_data.Precision, lambda m: m.name.lower())
PRECISION_ALGORITHM = _enum(xla_data.PrecisionAlgorithm,
                            lambda m: m.name.lower()[len("alg_"):])
TRANSPOSE = _enum(xla_data.Transpose)
API_VERSION = _enum(xla_data.CustomCallApiVersion,
                    skip=("API_VERSION_UNSPECIFIED",))
SCHEDULE = _enum(xla_data.CustomCallSchedule)
PADDING_TYPE = _enum(xla_data.PaddingType)


def _all_default_precision(value) -> bool:
  return all(p == xla_data.Precision.DEFAULT for p in value)


@dataclasses.dataclass(frozen=True)
class AttrSpec:
  """One attribute an opcode accepts.

  Printing: a required attribute is always printed; an unset one is printed
  (as `default`) only if `print_default`; a set one is skipped when it equals
  `default` (or `is_default(value)` holds) unless `print_default`.
  """

  name: str
  kind: AttrKind
  required: bool = False
  default: Any = None
  print_default: bool = False
  enum: Optional[EnumText] = None  # ENUM kind; None accepts any identifier
  is_default: Optional[Callable[[Any], bool]] = None

  def should_print(self, value) -> bool:
    if value is None:
      return self.print_default
    if self.required or self.print_default:
      return True
    if self.is_default is not None:
      return not self.is_default(value)
    return value != self.default


K = AttrKind
A = AttrSpec
O = HloOpcode


def _dims(required=True, print_default=False):
  return A("dimensions", K.INT_LIST, required, default=(),
           print_default=print_default)


_TO_APPLY = A("to_apply", K.COMPUTATION, required=True)
_CHANNEL_ID = A("channel_id", K.INT)
_REPLICA_GROUPS = A("replica_groups", K.REPLICA_GROUPS, default=(),
                    print_default=True)
_CONSTRAIN_LAYOUT = A("constrain_layout", K.BOOL, default=False)
_GLOBAL_IDS = A("use_global_device_ids", K.BOOL, default=False)
_WINDOW = A("window", K.WINDOW, is_default=lambda w: not w.dimensions)
_PRECISION = A("operand_precision", K.PRECISION_LIST,
               is_default=_all_default_precision)
_ALGORITHM = A("algorithm", K.ENUM, enum=PRECISION_ALGORITHM,
               default=xla_data.PrecisionAlgorithm.ALG_UNSET)
_ALIASING = A("output_to_operand_aliasing", K.ALIASING, default=())
_HOST = A("is_host_transfer", K.BOOL, default=False)
_ACCURACY = A("result_accuracy", K.RAW)
_DOT_DIMS = (
    A("lhs_batch_dims", K.INT_LIST, default=()),
    A("lhs_contracting_dims", K.INT_LIST, default=(), print_default=True),
    A("rhs_batch_dims", K.INT_LIST, default=()),
    A("rhs_contracting_dims", K.INT_LIST, default=(), print_default=True),
)
_ALL_REDUCE = (
    _CHANNEL_ID, _REPLICA_GROUPS, _CONSTRAIN_LAYOUT, _GLOBAL_IDS,
    A("mode", K.ENUM), _TO_APPLY,
)
_ALL_GATHER = (
    _CHANNEL_ID, _REPLICA_GROUPS, _CONSTRAIN_LAYOUT,
    A("dimensions", K.INT_LIST, required=True), _GLOBAL_IDS,
)
_PERMUTE = (
    _CHANNEL_ID, A("source_target_pairs", K.INT_LIST_LIST, required=True),
    A("slice_sizes", K.INT_LIST_LIST),
)
_CHANNEL = (_CHANNEL_ID, _HOST)
_BATCH_NORM = (A("epsilon", K.FLOAT, required=True),
               A("feature_index", K.INT, required=True))
_CONV_LIKE = (
    _WINDOW, A("dim_labels", K.DIM_LABELS),
    A("feature_group_count", K.INT, default=1),
    A("batch_group_count", K.INT, default=1),
)

# Opcode -> its attributes in print order. Opcodes not listed take none.
OPCODE_ATTRS: dict[HloOpcode, tuple[AttrSpec, ...]] = {
    O.kAllGather: _ALL_GATHER,
    O.kAllGatherStart: _ALL_GATHER,
    O.kAllReduce: _ALL_REDUCE,
    O.kAllReduceStart: _ALL_REDUCE,
    O.kReduceScatter: _ALL_REDUCE[:4] + (
        A("dimensions", K.INT_LIST, required=True),) + _ALL_REDUCE[4:],
    O.kAllToAll: (_CHANNEL_ID, _REPLICA_GROUPS, _CONSTRAIN_LAYOUT,
                  A("dimensions", K.INT_LIST)),
    O.kRaggedAllToAll: (_CHANNEL_ID, _REPLICA_GROUPS,
                        A("dimensions", K.INT_LIST)),
    O.kCollectiveBroadcast: (_CHANNEL_ID, _REPLICA_GROUPS),
    O.kCollectivePermute: _PERMUTE,
    O.kCollectivePermuteStart: _PERMUTE,
    O.kAsyncStart: (A("async_execution_thread", K.STRING, default="main"),
                    _ALIASING, A("calls", K.COMPUTATION, required=True)),
    O.kAsyncUpdate: (A("async_execution_thread", K.STRING, default="main"),
                     A("calls", K.COMPUTATION)),
    O.kAsyncDone: (A("async_execution_thread", K.STRING, default="main"),
                   A("calls", K.COMPUTATION)),
    O.kCopyStart: (A("cross_program_prefetch_index", K.INT),),
    O.kReshape: (A("inferred_dimension", K.INT, default=-1),),
    O.kIota: (A("iota_dimension", K.INT, required=True),),
    O.kTopK: (A("k", K.INT, required=True),
              A("largest", K.BOOL, default=True, print_default=True)),
    O.kSort: (A("dimensions", K.INT_LIST, required=True),
              A("is_stable", K.BOOL, default=False), _TO_APPLY),
    O.kWhile: (A("condition", K.COMPUTATION, required=True),
               A("body", K.COMPUTATION, required=True)),
    O.kRecv: _CHANNEL,
    O.kRecvDone: _CHANNEL,
    O.kSend: _CHANNEL,
    O.kSendDone: _CHANNEL,
    O.kGetTupleElement: (A("index", K.INT, required=True),),
    O.kCall: (A("is_composite", K.BOOL, default=False), _TO_APPLY),
    O.kReduceWindow: (_WINDOW, _TO_APPLY),
    O.kConvolution: (
        _WINDOW, A("dim_labels", K.DIM_LABELS, required=True)) +
                    _CONV_LIKE[2:] + (
        _PRECISION, A("conv_kind", K.ENUM)),
    O.kFft: (A("fft_type", K.ENUM, required=True, enum=FFT_TYPE),
             A("fft_length", K.INT_LIST, required=True)),
    O.kTriangularSolve: (
        A("left_side", K.BOOL, default=False),
        A("lower", K.BOOL, default=False),
        A("unit_diagonal", K.BOOL, default=False),
        A("transpose_a", K.ENUM, enum=TRANSPOSE,
          default=xla_data.Transpose.TRANSPOSE_INVALID)),
    O.kCompare: (A("direction", K.ENUM, required=True, enum=DIRECTION),
                 A("type", K.ENUM, enum=COMPARISON_TYPE)),
    O.kCholesky: (A("lower", K.BOOL, default=False),),
    O.kBroadcast: (_dims(required=False, print_default=True),),
    O.kConcatenate: (_dims(),),
    O.kMap: (A("dimensions", K.INT_LIST), _TO_APPLY),
    O.kScan: (_dims(), A("num_carries", K.INT, required=True),
              A("is_reverse", K.BOOL, default=False),
              A("is_associative", K.BOOL, default=False), _TO_APPLY),
    O.kReduce: (_dims(), _TO_APPLY),
    O.kReverse: (_dims(),),
    O.kTranspose: (_dims(),),
    O.kSelectAndScatter: (_WINDOW,
                          A("select", K.COMPUTATION, required=True),
                          A("scatter", K.COMPUTATION, required=True)),
    O.kSlice: (A("slice", K.SLICE_RANGES, required=True),),
    O.kDynamicSlice: (A("dynamic_slice_sizes", K.INT_LIST, required=True),),
    O.kBatchNormTraining: _BATCH_NORM,
    O.kBatchNormInference: _BATCH_NORM,
    O.kBatchNormGrad: _BATCH_NORM,
    O.kPad: (A("padding", K.PADDING_CONFIG, required=True),),
    O.kFusion: (A("kind", K.ENUM, required=True, enum=FUSION_KIND),
                _ALIASING, A("calls", K.COMPUTATION, required=True)),
    O.kInfeed: (A("infeed_config", K.STRING, default=""),),
    O.kOutfeed: (A("outfeed_shape", K.SHAPE),
                 A("outfeed_config", K.STRING, default="")),
    O.kRng: (A("distribution", K.ENUM, required=True, enum=DISTRIBUTION),),
    O.kRngGetAndUpdateState: (A("delta", K.INT, required=True),),
    O.kRngBitGenerator: (A("algorithm", K.ENUM, required=True,
                           enum=RNG_ALGORITHM),),
    O.kReducePrecision: (A("exponent_bits", K.INT, required=True),
                         A("mantissa_bits", K.INT, required=True)),
    O.kConditional: (A("true_computation", K.COMPUTATION),
                     A("false_computation", K.COMPUTATION),
                     A("branch_computations", K.COMPUTATION_LIST)),
    O.kCustomCall: (
        A("custom_call_target", K.STRING, required=True),) + _CONV_LIKE + (
        _PRECISION,
        A("operand_layout_constraints", K.SHAPE_LIST),
        A("custom_call_has_side_effect", K.BOOL, default=False),
        A("literal", K.LITERAL),
        _ALIASING,
        A("padding_type", K.ENUM, enum=PADDING_TYPE),
        A("schedule", K.ENUM, enum=SCHEDULE,
          default=xla_data.CustomCallSchedule.SCHEDULE_NONE),
        A("api_version", K.ENUM, enum=API_VERSION,
          default=xla_data.CustomCallApiVersion.API_VERSION_ORIGINAL),
        A("to_apply", K.COMPUTATION),
        A("called_computations", K.COMPUTATION_LIST)),
    O.kDot: _DOT_DIMS + (_PRECISION, _ALGORITHM),
    O.kScaledDot: _DOT_DIMS + (_PRECISION, _ALGORITHM),
    O.kRaggedDot: _DOT_DIMS + (
        A("lhs_ragged_dims", K.INT_LIST, default=()),
        A("rhs_group_dims", K.INT_LIST, default=()), _PRECISION),
    O.kGather: (
        A("offset_dims", K.INT_LIST, required=True),
        A("collapsed_slice_dims", K.INT_LIST, required=True),
        A("start_index_map", K.INT_LIST, required=True),
        A("operand_batching_dims", K.INT_LIST, default=()),
        A("start_indices_batching_dims", K.INT_LIST, default=()),
        A("index_vector_dim", K.INT, required=True),
        A("slice_sizes", K.INT_LIST, required=True),
        A("indices_are_sorted", K.BOOL, default=False)),
    O.kScatter: (
        A("update_window_dims", K.INT_LIST, required=True),
        A("inserted_window_dims", K.INT_LIST, required=True),
        A("scatter_dims_to_operand_dims", K.INT_LIST, required=True),
        A("input_batching_dims", K.INT_LIST, default=()),
        A("scatter_indices_batching_dims", K.INT_LIST, default=()),
        A("index_vector_dim", K.INT, required=True),
        A("indices_are_sorted", K.BOOL, default=False),
        A("unique_indices", K.BOOL, default=False), _TO_APPLY),
    O.kDomain: (A("domain", K.RAW, required=True),),
    O.kGetDimensionSize: (_dims(),),
    O.kSetDimensionSize: (_dims(),),
}

# Unary math that accepts `result_accuracy=`.
for _op in (O.kAcos, O.kAcosh, O.kAsin, O.kAsinh, O.kAtanh, O.kExpm1, O.kLog,
            O.kLog1p, O.kLogistic, O.kSqrt, O.kCbrt, O.kRsqrt, O.kTanh,
            O.kErf, O.kSin, O.kSinh, O.kCos, O.kCosh, O.kTan, O.kExp):
  OPCODE_ATTRS[_op] = (_ACCURACY,)

# Opcodes the HLO text parser cannot build yet, with the reason. (XLA's own
# parser does not accept them either.)
UNSUPPORTED_OPCODES: dict[HloOpcode, str] = {
    O.kShuffle: "no HLO text syntax is defined for shuffle",
    O.kCollectiveReduce: "no HLO text syntax is defined for collective-reduce",
}

# Attributes every instruction may carry, in print order; these are fields
# of HloInstruction (the dict key is the field name).
COMMON_ATTRS: tuple[tuple[str, AttrSpec], ...] = (
    ("parameter_replication", A("parameter_replication", K.BOOL_LIST)),
    ("control_predecessors", A("control-predecessors", K.INSTRUCTION_LIST)),
    ("sharding", A("sharding", K.RAW)),
    ("frontend_attributes", A("frontend_attributes", K.FRONTEND_ATTRIBUTES)),
    ("statistics", A("statistics", K.RAW)),
    ("origin", A("origin", K.RAW)),
    ("metadata", A("metadata", K.METADATA)),
    ("backend_config", A("backend_config", K.STRING_OR_DICT)),
)
COMMON_BY_TEXT = {spec.name: (field, spec) for field, spec in COMMON_ATTRS}


def attr_specs(opcode: HloOpcode) -> tuple[AttrSpec, ...]:
  return OPCODE_ATTRS.get(opcode, ())


# Lookup tables derived from OPCODE_ATTRS (which is fixed once this module
# is imported): the passes ask for an opcode's spec and called-computation
# attributes tens of thousands of times per compile.
_SPEC_BY_NAME: dict[HloOpcode, dict[str, AttrSpec]] = {}
_COMPUTATION_ATTR_NAMES: dict[HloOpcode, tuple[str, ...]] = {}
for _op, _specs in OPCODE_ATTRS.items():
  _by_name: dict[str, AttrSpec] = {}
  for _spec in _specs:
    _by_name.setdefault(_spec.name, _spec)  # the first one wins
  _SPEC_BY_NAME[_op] = _by_name
  _COMPUTATION_ATTR_NAMES[_op] = tuple(
      s.name for s in _specs
      if s.kind in (AttrKind.COMPUTATION, AttrKind.COMPUTATION_LIST))


def attr_spec(opcode: HloOpcode, name: str) -> Optional[AttrSpec]:
  by_name = _SPEC_BY_NAME.get(opcode)
  return None if by_name is None else by_name.get(name)


# The opcodes whose instructions can call computations (a set, for scans
# of every instruction of a module that look only at those).
CALLING_OPCODES: frozenset[HloOpcode] = frozenset(
    op for op, names in _COMPUTATION_ATTR_NAMES.items() if names)


def calls_computations(opcode: HloOpcode) -> bool:
  """Whether instructions of `opcode` can call computations."""
  return bool(_COMPUTATION_ATTR_NAMES.get(opcode))


def computation_attr_names(opcode: HloOpcode) -> tuple[str, ...]:
  """Names of the attributes holding called computations, in order."""
  return _COMPUTATION_ATTR_NAMES.get(opcode, ())
