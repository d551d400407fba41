"""The few XLA protos PJRT exchanges, in protobuf wire format, by hand.

`PJRT_Client_Compile` takes a serialized `xla.CompileOptionsProto` and
`PJRT_LoadedExecutable_GetDeviceAssignment` returns a serialized
`xla.DeviceAssignmentProto`. We have no generated `_pb2` modules for XLA's
protos (nor want XLA's proto tree as a dependency of the ABI layer) and need
only a handful of scalar fields, so they are written and read here directly
in the wire format (https://protobuf.dev/programming-guides/encoding/).

Field numbers used (from xla/pjrt/proto/compile_options.proto and
xla/xla_data.proto at the XLA revision of PJRT C API 0.112):

  CompileOptionsProto
    1  repeated ShapeProto argument_layouts          (not written)
    2  bool parameter_is_tupled_arguments
    3  ExecutableBuildOptionsProto executable_build_options
    4  bool compile_portable_executable
    5  int64 profile_version                           (not written)
    7  map<string, OptionOverrideProto> env_option_overrides
         (entries: 1 key, 2 value)
  OptionOverrideProto (one of)
    1  string string_field
    2  bool bool_field
    3  int64 int_field
    4  double double_field
  ExecutableBuildOptionsProto
    1  int64 device_ordinal                            (-1: unspecified)
    4  int64 num_replicas
    5  int64 num_partitions
    6  bool use_spmd_partitioning
    9  DeviceAssignmentProto device_assignment
    12 repeated bool allow_spmd_sharding_propagation_to_output  (packed)
    18 repeated bool allow_spmd_sharding_propagation_to_parameters  (packed)
  DeviceAssignmentProto
    1  int32 replica_count
    2  int32 computation_count
    3  repeated ComputationDevice computation_devices  (one per computation)
  DeviceAssignmentProto.ComputationDevice
    1  repeated int64 replica_device_ids               (packed)
"""

from __future__ import annotations

import struct
from typing import Iterator, Sequence

import support

# Wire types.
_VARINT = 0
_I64 = 1
_LEN = 2
_I32 = 5

# CompileOptionsProto.
_CO_PARAMETER_IS_TUPLED_ARGUMENTS = 2
_CO_EXECUTABLE_BUILD_OPTIONS = 3
_CO_COMPILE_PORTABLE_EXECUTABLE = 4
_CO_ENV_OPTION_OVERRIDES = 7
# OptionOverrideProto.
_OO_STRING, _OO_BOOL, _OO_INT, _OO_DOUBLE = 1, 2, 3, 4
# ExecutableBuildOptionsProto.
_EBO_DEVICE_ORDINAL = 1
_EBO_NUM_REPLICAS = 4
_EBO_NUM_PARTITIONS = 5
_EBO_USE_SPMD_PARTITIONING = 6
_EBO_DEVICE_ASSIGNMENT = 9
_EBO_PROPAGATION_TO_OUTPUT = 12
_EBO_PROPAGATION_TO_PARAMETERS = 18
# DeviceAssignmentProto.
_DA_REPLICA_COUNT = 1
_DA_COMPUTATION_COUNT = 2
_DA_COMPUTATION_DEVICES = 3
# DeviceAssignmentProto.ComputationDevice.
_CD_REPLICA_DEVICE_IDS = 1


def _varint(value: int) -> bytes:
  """Base-128 varint; negative ints as 64-bit two's complement (10 bytes)."""
  value &= (1 << 64) - 1
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
  return _varint(field << 3 | wire_type)


def _int_field(field: int, value: int) -> bytes:
  """An int/bool field; proto3 omits the default 0."""
  return _key(field, _VARINT) + _varint(int(value)) if value else b""


def _message_field(field: int, payload: bytes) -> bytes:
  return _key(field, _LEN) + _varint(len(payload)) + payload


def encode_device_assignment(assignment: Sequence[Sequence[int]]) -> bytes:
  """Serializes a DeviceAssignmentProto.

  Args:
    assignment: device ids indexed [replica][computation] (partition), as
      XLA's DeviceAssignment.
  """
  replicas = len(assignment)
  computations = len(assignment[0]) if replicas else 0
  if any(len(row) != computations for row in assignment):
    raise support.InvalidArgumentError(
        "device assignment rows must all have the same length")
  out = _int_field(_DA_REPLICA_COUNT, replicas)
  out += _int_field(_DA_COMPUTATION_COUNT, computations)
  for c in range(computations):
    ids = b"".join(_varint(assignment[r][c]) for r in range(replicas))
    out += _message_field(_DA_COMPUTATION_DEVICES,
                          _message_field(_CD_REPLICA_DEVICE_IDS, ids))
  return out


def _packed_bools(field: int, values: Sequence[bool]) -> bytes:
  if not values:
    return b""
  return _message_field(field, b"".join(_varint(int(bool(v)))
                                        for v in values))


def compile_options(*, num_replicas: int = 1, num_partitions: int = 1,
                    device_ordinal: int = -1,
                    device_assignment: Sequence[Sequence[int]] | None = None,
                    use_spmd_partitioning: bool = False,
                    compile_portable_executable: bool = False,
                    parameter_is_tupled_arguments: bool = False,
                    allow_spmd_sharding_propagation_to_parameters:
                    Sequence[bool] = (),
                    allow_spmd_sharding_propagation_to_output:
                    Sequence[bool] = (),
                    env_option_overrides:
                    Sequence[tuple[str, str | bool | int | float]] = ()
                    ) -> bytes:
  """Serializes a minimal CompileOptionsProto.

  The defaults compile for one replica and one partition on a device the
  plugin picks, as `jax.jit` does for a single-device computation.
  """
  build = _int_field(_EBO_DEVICE_ORDINAL, device_ordinal)
  build += _int_field(_EBO_NUM_REPLICAS, num_replicas)
  build += _int_field(_EBO_NUM_PARTITIONS, num_partitions)
  build += _int_field(_EBO_USE_SPMD_PARTITIONING, use_spmd_partitioning)
  if device_assignment is not None:
    build += _message_field(_EBO_DEVICE_ASSIGNMENT,
                            encode_device_assignment(device_assignment))
  build += _packed_bools(_EBO_PROPAGATION_TO_OUTPUT,
                         allow_spmd_sharding_propagation_to_output)
  build += _packed_bools(_EBO_PROPAGATION_TO_PARAMETERS,
                         allow_spmd_sharding_propagation_to_parameters)
  out = _int_field(_CO_PARAMETER_IS_TUPLED_ARGUMENTS,
                   parameter_is_tupled_arguments)
  out += _message_field(_CO_EXECUTABLE_BUILD_OPTIONS, build)
  out += _int_field(_CO_COMPILE_PORTABLE_EXECUTABLE,
                    compile_portable_executable)
  for key, value in env_option_overrides:
    entry = _message_field(1, key.encode("utf-8"))
    entry += _message_field(2, _option_override(value))
    out += _message_field(_CO_ENV_OPTION_OVERRIDES, entry)
  return out


def _option_override(value: str | bool | int | float) -> bytes:
  if isinstance(value, bool):
    return _int_field(_OO_BOOL, value)
  if isinstance(value, int):
    return _int_field(_OO_INT, value)
  if isinstance(value, float):
    return (_key(_OO_DOUBLE, _I64) +
            struct.pack("<d", value))
  return _message_field(_OO_STRING, str(value).encode("utf-8"))


def decode_option_override(data: bytes) -> str | bool | int | float:
  """The value an OptionOverrideProto holds (a string when unset).

  Raises:
    support.DataLossError: on malformed input.
  """
  value: str | bool | int | float = ""
  for field, wire_type, raw in iter_fields(data):
    if field == _OO_STRING and wire_type == _LEN:
      value = bytes(raw).decode("utf-8", "replace")
    elif field == _OO_BOOL and wire_type == _VARINT:
      value = bool(raw)
    elif field == _OO_INT and wire_type == _VARINT:
      value = _signed64(raw)
    elif field == _OO_DOUBLE and wire_type == _I64:
      value = struct.unpack("<d", raw.to_bytes(8, "little"))[0]
  return value


def decode_env_option_overrides(data: bytes) -> list[tuple[str, object]]:
  """The env_option_overrides of a serialized CompileOptionsProto, as
  (key, value) in the order written.

  Raises:
    support.DataLossError: on malformed input.
  """
  out = []
  for field, wire_type, entry in iter_fields(data):
    if field != _CO_ENV_OPTION_OVERRIDES or wire_type != _LEN:
      continue
    key, value = "", ""
    for f, w, raw in iter_fields(entry):
      if f == 1 and w == _LEN:
        key = bytes(raw).decode("utf-8", "replace")
      elif f == 2 and w == _LEN:
        value = decode_option_override(raw)
    out.append((key, value))
  return out


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
  value = shift = 0
  while True:
    if pos >= len(data):
      raise support.DataLossError("truncated varint in serialized proto")
    byte = data[pos]
    pos += 1
    value |= (byte & 0x7F) << shift
    if not byte & 0x80:
      return value, pos
    shift += 7
    if shift >= 70:
      raise support.DataLossError("varint too long in serialized proto")


def _signed64(value: int) -> int:
  return value - (1 << 64) if value >= 1 << 63 else value


def repeated_bools(wire_type: int, value: int | bytes) -> list[bool]:
  """The values one occurrence of a repeated bool field holds: a packed
  run (wire type LEN) or a single varint.

  Raises:
    support.DataLossError: on malformed input.
  """
  if wire_type == _VARINT:
    return [bool(value)]
  if wire_type != _LEN:
    raise support.DataLossError(
        f"a repeated bool field has wire type {wire_type}")
  out, pos = [], 0
  while pos < len(value):
    v, pos = _read_varint(value, pos)
    out.append(bool(v))
  return out


def iter_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
  """Yields (field number, wire type, int or bytes) of a serialized message.

  Raises:
    support.DataLossError: on malformed input.
  """
  pos = 0
  while pos < len(data):
    key, pos = _read_varint(data, pos)
    field, wire_type = key >> 3, key & 7
    if wire_type == _VARINT:
      value, pos = _read_varint(data, pos)
    elif wire_type == _LEN:
      size, pos = _read_varint(data, pos)
      if pos + size > len(data):
        raise support.DataLossError("truncated field in serialized proto")
      value, pos = data[pos:pos + size], pos + size
    elif wire_type in (_I64, _I32):
      width = 8 if wire_type == _I64 else 4
      if pos + width > len(data):
        raise support.DataLossError("truncated field in serialized proto")
      value, pos = int.from_bytes(data[pos:pos + width], "little"), pos + width
    else:
      raise support.DataLossError(f"unsupported wire type {wire_type}")
    yield field, wire_type, value


def decode_device_assignment(data: bytes) -> list[list[int]]:
  """Parses a DeviceAssignmentProto into ids indexed [replica][computation]."""
  replicas = computations = 0
  columns: list[list[int]] = []
  for field, wire_type, value in iter_fields(data):
    if field == _DA_REPLICA_COUNT and wire_type == _VARINT:
      replicas = value
    elif field == _DA_COMPUTATION_COUNT and wire_type == _VARINT:
      computations = value
    elif field == _DA_COMPUTATION_DEVICES and wire_type == _LEN:
      ids: list[int] = []
      for sub_field, sub_type, sub_value in iter_fields(value):
        if sub_field != _CD_REPLICA_DEVICE_IDS:
          continue
        if sub_type == _LEN:  # Packed.
          pos = 0
          while pos < len(sub_value):
            item, pos = _read_varint(sub_value, pos)
            ids.append(_signed64(item))
        elif sub_type == _VARINT:
          ids.append(_signed64(sub_value))
      columns.append(ids)
  if len(columns) != computations or any(len(c) != replicas for c in columns):
    raise support.DataLossError(
        f"DeviceAssignmentProto of {replicas}x{computations} has "
        f"{[len(c) for c in columns]} device ids per computation")
  return [[columns[c][r] for c in range(computations)]
          for r in range(replicas)]
