"""XLA's data model messages (xla/xla_data.proto) as Python values.

Enum values keep the proto numbering, so they can cross a proto boundary
unchanged. Messages are frozen dataclasses; the HLO text spelling of each one
lives with the HLO printer/parser (`xla.hlo.ir.hlo_attrs`,
`xla.hlo.parser`), except `Window`, whose text form XLA also keeps next to it
(window_util).
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np


class PrimitiveType(enum.IntEnum):
  """xla.PrimitiveType, with the proto's field numbers."""

  PRIMITIVE_TYPE_INVALID = 0
  PRED = 1
  S1 = 30
  S2 = 26
  S4 = 21
  S8 = 2
  S16 = 3
  S32 = 4
  S64 = 5
  U1 = 31
  U2 = 27
  U4 = 22
  U8 = 6
  U16 = 7
  U32 = 8
  U64 = 9
  F16 = 10
  F32 = 11
  BF16 = 16
  F64 = 12
  F8E5M2 = 19
  F8E4M3 = 28
  F8E4M3FN = 20
  F8E4M3B11FNUZ = 23
  F8E3M4 = 29
  F8E5M2FNUZ = 24
  F8E4M3FNUZ = 25
  F4E2M1FN = 32
  F8E8M0FNU = 33
  C64 = 15
  C128 = 18
  TUPLE = 13
  OPAQUE_TYPE = 14
  TOKEN = 17
  BUFFER = 34


class FftType(enum.IntEnum):
  FFT = 0
  IFFT = 1
  RFFT = 2
  IRFFT = 3


class PaddingType(enum.IntEnum):
  PADDING_INVALID = 0
  PADDING_VALID = 1
  PADDING_SAME = 2


class RandomDistribution(enum.IntEnum):
  RNG_INVALID = 0
  RNG_UNIFORM = 1
  RNG_NORMAL = 2


class RandomAlgorithm(enum.IntEnum):
  RNG_DEFAULT = 0
  RNG_THREE_FRY = 1
  RNG_PHILOX = 2


class Precision(enum.IntEnum):
  """PrecisionConfig.Precision."""

  DEFAULT = 0
  HIGH = 1
  HIGHEST = 2


class PrecisionAlgorithm(enum.IntEnum):
  """PrecisionConfig.Algorithm; text is the lowercase name without `ALG_`."""

  ALG_UNSET = 0
  ALG_DOT_ANY_F8_ANY_F8_F32 = 1
  ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM = 2
  ALG_DOT_F16_F16_F16 = 3
  ALG_DOT_F16_F16_F32 = 4
  ALG_DOT_BF16_BF16_BF16 = 5
  ALG_DOT_BF16_BF16_F32 = 6
  ALG_DOT_BF16_BF16_F32_X3 = 7
  ALG_DOT_BF16_BF16_F32_X6 = 8
  ALG_DOT_TF32_TF32_F32 = 9
  ALG_DOT_TF32_TF32_F32_X3 = 10
  ALG_DOT_F32_F32_F32 = 11
  ALG_DOT_F64_F64_F64 = 12
  ALG_DOT_BF16_BF16_F32_X9 = 13


class Transpose(enum.IntEnum):
  """TriangularSolveOptions.Transpose."""

  TRANSPOSE_INVALID = 0
  NO_TRANSPOSE = 1
  TRANSPOSE = 2
  ADJOINT = 3


class CustomCallSchedule(enum.IntEnum):
  SCHEDULE_NONE = 0
  SCHEDULE_LATEST = 1
  SCHEDULE_EARLIEST = 2


class CustomCallApiVersion(enum.IntEnum):
  API_VERSION_UNSPECIFIED = 0
  API_VERSION_ORIGINAL = 1
  API_VERSION_STATUS_RETURNING = 2
  API_VERSION_STATUS_RETURNING_UNIFIED = 3
  API_VERSION_TYPED_FFI = 4


class ComparisonDirection(enum.Enum):
  """Comparison::Direction; the text form is the member name."""

  EQ = "EQ"
  NE = "NE"
  GE = "GE"
  GT = "GT"
  LE = "LE"
  LT = "LT"


class ComparisonType(enum.Enum):
  """Comparison::Type; the text form is the member value."""

  FLOAT = "FLOAT"
  TOTALORDER = "TOTALORDER"
  SIGNED = "SIGNED"
  UNSIGNED = "UNSIGNED"


@dataclasses.dataclass(frozen=True)
class PaddingDimension:
  """PaddingConfig.PaddingConfigDimension."""

  edge_padding_low: int = 0
  edge_padding_high: int = 0
  interior_padding: int = 0


@dataclasses.dataclass(frozen=True)
class PaddingConfig:
  dimensions: tuple[PaddingDimension, ...] = ()


@dataclasses.dataclass(frozen=True)
class WindowDimension:
  size: int = 0
  stride: int = 1
  padding_low: int = 0
  padding_high: int = 0
  window_dilation: int = 1
  base_dilation: int = 1
  window_reversal: bool = False


@dataclasses.dataclass(frozen=True)
class Window:
  """The window of convolution / reduce-window / select-and-scatter."""

  dimensions: tuple[WindowDimension, ...] = ()

  def to_string(self) -> str:
    """XLA's window text (window_util::ToString): `size=3x3 stride=2x2 ...`.

    `size` is always printed; every other field only when some dimension
    differs from its default.
    """
    dims = self.dimensions

    def join(values):
      return "x".join(str(v) for v in values)

    parts = [f"size={join(d.size for d in dims)}"]
    if any(d.stride != 1 for d in dims):
      parts.append(f"stride={join(d.stride for d in dims)}")
    if any(d.padding_low or d.padding_high for d in dims):
      parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}"
                                     for d in dims))
    if any(d.base_dilation != 1 for d in dims):
      parts.append(f"lhs_dilate={join(d.base_dilation for d in dims)}")
    if any(d.window_dilation != 1 for d in dims):
      parts.append(f"rhs_dilate={join(d.window_dilation for d in dims)}")
    if any(d.window_reversal for d in dims):
      parts.append(
          f"rhs_reversal={join(int(d.window_reversal) for d in dims)}")
    return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class ConvolutionDimensionNumbers:
  input_batch_dimension: int = 0
  input_feature_dimension: int = 0
  input_spatial_dimensions: tuple[int, ...] = ()
  kernel_input_feature_dimension: int = 0
  kernel_output_feature_dimension: int = 0
  kernel_spatial_dimensions: tuple[int, ...] = ()
  output_batch_dimension: int = 0
  output_feature_dimension: int = 0
  output_spatial_dimensions: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class DotDimensionNumbers:
  lhs_contracting_dimensions: tuple[int, ...] = ()
  rhs_contracting_dimensions: tuple[int, ...] = ()
  lhs_batch_dimensions: tuple[int, ...] = ()
  rhs_batch_dimensions: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class GatherDimensionNumbers:
  offset_dims: tuple[int, ...] = ()
  collapsed_slice_dims: tuple[int, ...] = ()
  start_index_map: tuple[int, ...] = ()
  index_vector_dim: int = 0
  operand_batching_dims: tuple[int, ...] = ()
  start_indices_batching_dims: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class ScatterDimensionNumbers:
  update_window_dims: tuple[int, ...] = ()
  inserted_window_dims: tuple[int, ...] = ()
  scatter_dims_to_operand_dims: tuple[int, ...] = ()
  index_vector_dim: int = 0
  input_batching_dims: tuple[int, ...] = ()
  scatter_indices_batching_dims: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class OpMetadata:
  """The OpMetadata fields that HLO text carries (`metadata={...}`)."""

  op_type: str = ""
  op_name: str = ""
  source_file: str = ""
  source_line: int = 0
  source_end_line: int = 0
  source_column: int = 0
  source_end_column: int = 0
  profile_type: tuple[int, ...] = ()
  deduplicated_name: str = ""
  scheduling_name: str = ""
  stack_frame_id: int = 0

  def is_empty(self) -> bool:
    return self == OpMetadata()


@dataclasses.dataclass(frozen=True)
class FileLocation:
  """StackFrameIndexProto.FileLocation (ids are 1-based in HLO text)."""

  file_name_id: int
  function_name_id: int
  line: int
  end_line: int
  column: int
  end_column: int


@dataclasses.dataclass(frozen=True)
class StackFrame:
  """StackFrameIndexProto.StackFrame; ids as written in HLO text (1-based)."""

  file_location_id: int
  parent_frame_id: int


@dataclasses.dataclass(frozen=True)
class StackFrameIndex:
  """The module's FileNames / FunctionNames / FileLocations / StackFrames."""

  file_names: tuple[str, ...] = ()
  function_names: tuple[str, ...] = ()
  file_locations: tuple[FileLocation, ...] = ()
  stack_frames: tuple[StackFrame, ...] = ()


@dataclasses.dataclass(frozen=True)
class OutputOperandAliasing:
  """One `{output_index}: (operand, {operand_index})` pair."""

  output_shape_index: tuple[int, ...]
  operand_index: int
  operand_shape_index: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class IotaReplicaGroupList:
  """`[groups,size]<=[reshape]T(perm)`: replica groups as a transposed iota."""

  num_replica_groups: int
  num_devices_per_group: int
  iota_reshape_dims: tuple[int, ...]
  iota_transpose_perm: tuple[int, ...]

  def replica_groups(self) -> tuple[tuple[int, ...], ...]:
    """Expands to the explicit list of groups."""
    total = self.num_replica_groups * self.num_devices_per_group
    ids = np.arange(total).reshape(self.iota_reshape_dims)
    ids = ids.transpose(self.iota_transpose_perm).reshape(
        self.num_replica_groups, self.num_devices_per_group)
    return tuple(tuple(int(v) for v in row) for row in ids)

