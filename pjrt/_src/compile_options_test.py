"""Tests of the hand-written CompileOptionsProto / DeviceAssignmentProto.

The encoding is checked against golden bytes and, independently, by parsing
it with the protobuf library through descriptors declared here with the same
field numbers as XLA's .proto files.
"""

import pytest

import support
from pjrt._src import compile_options


def _xla_messages():
  """Message classes for the subset of XLA's protos we write (private pool)."""
  descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
  descriptor_pool = pytest.importorskip("google.protobuf.descriptor_pool")
  message_factory = pytest.importorskip("google.protobuf.message_factory")
  field = descriptor_pb2.FieldDescriptorProto
  file = descriptor_pb2.FileDescriptorProto(
      name="pjrt_test_xla_subset.proto", package="xla", syntax="proto3")

  def message(name, fields, nested=()):
    proto = descriptor_pb2.DescriptorProto(name=name)
    for number, field_name, kind, label, type_name in fields:
      proto.field.add(name=field_name, number=number, type=kind, label=label,
                      type_name=type_name)
    proto.nested_type.extend(nested)
    return proto

  optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
  computation_device = message("ComputationDevice", [
      (1, "replica_device_ids", field.TYPE_INT64, repeated, None)])
  file.message_type.extend([
      message("DeviceAssignmentProto", [
          (1, "replica_count", field.TYPE_INT32, optional, None),
          (2, "computation_count", field.TYPE_INT32, optional, None),
          (3, "computation_devices", field.TYPE_MESSAGE, repeated,
           ".xla.DeviceAssignmentProto.ComputationDevice"),
      ], [computation_device]),
      message("ExecutableBuildOptionsProto", [
          (1, "device_ordinal", field.TYPE_INT64, optional, None),
          (4, "num_replicas", field.TYPE_INT64, optional, None),
          (5, "num_partitions", field.TYPE_INT64, optional, None),
          (6, "use_spmd_partitioning", field.TYPE_BOOL, optional, None),
          (9, "device_assignment", field.TYPE_MESSAGE, optional,
           ".xla.DeviceAssignmentProto"),
      ]),
      message("CompileOptionsProto", [
          (2, "parameter_is_tupled_arguments", field.TYPE_BOOL, optional,
           None),
          (3, "executable_build_options", field.TYPE_MESSAGE, optional,
           ".xla.ExecutableBuildOptionsProto"),
          (4, "compile_portable_executable", field.TYPE_BOOL, optional, None),
      ]),
  ])
  pool = descriptor_pool.DescriptorPool()
  pool.Add(file)
  return {name: message_factory.GetMessageClass(
      pool.FindMessageTypeByName("xla." + name))
          for name in ("CompileOptionsProto", "DeviceAssignmentProto")}


def test_default_options_golden_bytes():
  # executable_build_options { device_ordinal: -1 num_replicas: 1
  #                            num_partitions: 1 }
  assert compile_options.compile_options().hex() == (
      "1a0f" "08ffffffffffffffffff01" "2001" "2801")


def test_options_parse_with_protobuf():
  messages = _xla_messages()
  data = compile_options.compile_options(
      num_replicas=2, num_partitions=3, device_ordinal=-1,
      device_assignment=[[0, 1, 2], [3, 4, 5]], use_spmd_partitioning=True,
      compile_portable_executable=True)
  proto = messages["CompileOptionsProto"].FromString(data)
  build = proto.executable_build_options
  assert (build.device_ordinal, build.num_replicas, build.num_partitions) == (
      -1, 2, 3)
  assert build.use_spmd_partitioning and proto.compile_portable_executable
  assignment = build.device_assignment
  assert (assignment.replica_count, assignment.computation_count) == (2, 3)
  assert [list(c.replica_device_ids)
          for c in assignment.computation_devices] == [[0, 3], [1, 4], [2, 5]]


def test_device_assignment_round_trip():
  assignment = [[0, 1], [2, 3], [4, 5]]
  data = compile_options.encode_device_assignment(assignment)
  assert compile_options.decode_device_assignment(data) == assignment
  proto = _xla_messages()["DeviceAssignmentProto"](
      replica_count=3, computation_count=2)
  proto.computation_devices.add(replica_device_ids=[0, 2, 4])
  proto.computation_devices.add(replica_device_ids=[1, 3, 5])
  assert compile_options.decode_device_assignment(
      proto.SerializeToString()) == assignment


def test_device_assignment_rejects_ragged_rows():
  with pytest.raises(support.InvalidArgumentError, match="same length"):
    compile_options.encode_device_assignment([[0, 1], [2]])


@pytest.mark.parametrize("data", [b"\x08", b"\x1a\x05ab", b"\x0f"])
def test_malformed_input(data):
  with pytest.raises(support.DataLossError):
    list(compile_options.iter_fields(data))


def test_inconsistent_device_assignment():
  # replica_count 2, but no computation devices.
  with pytest.raises(support.DataLossError, match="device ids"):
    compile_options.decode_device_assignment(b"\x08\x02\x10\x01")
