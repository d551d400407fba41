"""Protobuf message classes for XLA's HloModuleProto and the data it uses.

The descriptors are built at import time from the field facts of XLA's
`xla/xla_data.proto` and `xla/service/hlo.proto` (package `xla`, proto3):
field names and numbers match upstream so the bytes are wire compatible, but
only the subset the HLO IR can represent is declared. Fields left out are
kept by protobuf as unknown fields; `hlo_proto` reports those that matter.

We build the descriptors ourselves (descriptor_pb2 + a private
DescriptorPool) rather than ship generated `_pb2` code: the project runs no
protoc, and a private pool cannot clash with another copy of XLA's protos
(jaxlib, tensorflow) loaded in the same process.

Enum-typed fields are declared as their enums where the IR has a matching
Python enum (PrimitiveType, RandomDistribution, ...) and as int32 otherwise;
both encode as varints, so the wire format is the same.
"""

from __future__ import annotations

import enum

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory

from xla import xla_data

_F = descriptor_pb2.FieldDescriptorProto
_OPT = _F.LABEL_OPTIONAL
_REP = _F.LABEL_REPEATED

# Scalar type spellings used in the tables below.
_SCALARS = {
    "int64": _F.TYPE_INT64, "int32": _F.TYPE_INT32, "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES, "float": _F.TYPE_FLOAT, "double": _F.TYPE_DOUBLE,
}

# Enums declared from the IR's Python enums: proto name -> (enum, scope).
# Values keep the proto numbering (xla_data documents that).
_ENUMS = {
    "PrimitiveType": xla_data.PrimitiveType,
    "RandomDistribution": xla_data.RandomDistribution,
    "RandomAlgorithm": xla_data.RandomAlgorithm,
    "FftType": xla_data.FftType,
    "PaddingType": xla_data.PaddingType,
    "CustomCallSchedule": xla_data.CustomCallSchedule,
    "CustomCallApiVersion": xla_data.CustomCallApiVersion,
}
_NESTED_ENUMS = {
    "PrecisionConfig": {"Precision": xla_data.Precision,
                        "Algorithm": xla_data.PrecisionAlgorithm},
    "TriangularSolveOptions": {"Transpose": xla_data.Transpose},
}

# message name -> list of (field name, number, type, repeated?).
# A type that is not a scalar names a message or enum of package `xla`
# (`Outer.Inner` for nested ones). "map<K,V>" declares a map field.
_MESSAGES: dict[str, list[tuple]] = {
    # ---- xla_data.proto ----
    "PaddingConfig.PaddingConfigDimension": [
        ("edge_padding_low", 1, "int64"), ("edge_padding_high", 2, "int64"),
        ("interior_padding", 3, "int64")],
    "PaddingConfig": [
        ("dimensions", 1, "PaddingConfig.PaddingConfigDimension", True)],
    "TileProto": [("dimensions", 1, "int64", True)],
    "SplitConfigProto": [("dimension", 1, "int64"),
                         ("split_indices", 2, "int64", True)],
    "LayoutProto": [
        ("minor_to_major", 1, "int64", True),
        ("dim_level_types", 9, "int32", True),
        ("dim_unique", 13, "bool", True), ("dim_ordered", 14, "bool", True),
        ("tiles", 6, "TileProto", True),
        ("tail_padding_alignment_in_elements", 16, "int64"),
        ("element_size_in_bits", 7, "int64"), ("memory_space", 8, "int64"),
        ("index_primitive_type", 11, "PrimitiveType"),
        ("pointer_primitive_type", 12, "PrimitiveType"),
        ("physical_shape", 10, "ShapeProto"),
        ("dynamic_shape_metadata_prefix_bytes", 15, "int64"),
        ("split_configs", 17, "SplitConfigProto", True)],
    "ShapeProto": [
        ("element_type", 2, "PrimitiveType"), ("dimensions", 3, "int64", True),
        ("is_dynamic_dimension", 6, "bool", True),
        ("tuple_shapes", 4, "ShapeProto", True), ("layout", 5, "LayoutProto")],
    "ProgramShapeProto": [
        ("parameters", 1, "ShapeProto", True), ("result", 2, "ShapeProto"),
        ("parameter_names", 3, "string", True)],
    # OpMetadata: profile_info (10) is left out.
    "OpMetadata": [
        ("op_type", 1, "string"), ("op_name", 2, "string"),
        ("source_file", 3, "string"), ("source_line", 4, "int32"),
        ("source_end_line", 17, "int32"), ("source_column", 18, "int32"),
        ("source_end_column", 19, "int32"),
        ("profile_type", 5, "int32", True),
        ("size_of_generated_code_in_bytes", 8, "int64"),
        ("size_of_memory_working_set_in_bytes", 9, "int64"),
        ("deduplicated_name", 12, "string"), ("stack_frame_id", 15, "int32"),
        ("scheduling_name", 16, "string")],
    "LiteralProto": [
        ("shape", 1, "ShapeProto"), ("preds", 2, "bool", True),
        ("s1s", 30, "bytes"), ("s2s", 26, "bytes"), ("s4s", 21, "bytes"),
        ("s8s", 15, "bytes"), ("u1s", 31, "bytes"), ("u2s", 27, "bytes"),
        ("u4s", 22, "bytes"), ("u8s", 3, "bytes"),
        ("s32s", 4, "int32", True), ("s64s", 5, "int64", True),
        ("u32s", 6, "uint32", True), ("u64s", 7, "uint64", True),
        ("f32s", 8, "float", True), ("f64s", 9, "double", True),
        ("c64s", 12, "float", True), ("c128s", 18, "double", True),
        ("tuple_literals", 10, "LiteralProto", True),
        ("f16s", 11, "bytes"), ("bf16s", 13, "bytes"), ("u16s", 16, "bytes"),
        ("s16s", 17, "bytes"), ("f4e2m1fns", 32, "bytes"),
        ("f8e3m4s", 29, "bytes"), ("f8e4m3b11fnuzs", 23, "bytes"),
        ("f8e4m3fns", 20, "bytes"), ("f8e4m3fnuzs", 25, "bytes"),
        ("f8e4m3s", 28, "bytes"), ("f8e5m2fnuzs", 24, "bytes"),
        ("f8e5m2s", 19, "bytes"), ("f8e8m0fnus", 33, "bytes"),
        ("sparse_indices", 14, "int64", True)],
    "WindowDimension": [
        ("size", 1, "int64"), ("stride", 2, "int64"),
        ("padding_low", 3, "int64"), ("padding_high", 4, "int64"),
        ("window_dilation", 5, "int64"), ("base_dilation", 6, "int64"),
        ("window_reversal", 7, "bool")],
    "Window": [("dimensions", 1, "WindowDimension", True)],
    "GatherDimensionNumbers": [
        ("offset_dims", 1, "int64", True),
        ("collapsed_slice_dims", 2, "int64", True),
        ("start_index_map", 3, "int64", True),
        ("index_vector_dim", 4, "int64"),
        ("operand_batching_dims", 5, "int64", True),
        ("start_indices_batching_dims", 6, "int64", True)],
    "ScatterDimensionNumbers": [
        ("update_window_dims", 1, "int64", True),
        ("inserted_window_dims", 2, "int64", True),
        ("scatter_dims_to_operand_dims", 3, "int64", True),
        ("index_vector_dim", 4, "int64"),
        ("input_batching_dims", 5, "int64", True),
        ("scatter_indices_batching_dims", 6, "int64", True)],
    "ConvolutionDimensionNumbers": [
        ("input_batch_dimension", 7, "int64"),
        ("input_feature_dimension", 8, "int64"),
        ("input_spatial_dimensions", 11, "int64", True),
        ("kernel_input_feature_dimension", 3, "int64"),
        ("kernel_output_feature_dimension", 4, "int64"),
        ("kernel_spatial_dimensions", 6, "int64", True),
        ("output_batch_dimension", 9, "int64"),
        ("output_feature_dimension", 10, "int64"),
        ("output_spatial_dimensions", 12, "int64", True)],
    "DotDimensionNumbers": [
        ("lhs_contracting_dimensions", 1, "int64", True),
        ("rhs_contracting_dimensions", 2, "int64", True),
        ("lhs_batch_dimensions", 3, "int64", True),
        ("rhs_batch_dimensions", 4, "int64", True)],
    "RaggedDotDimensionNumbers": [
        ("dot_dimension_numbers", 1, "DotDimensionNumbers"),
        ("lhs_ragged_dimensions", 2, "int64", True),
        ("rhs_group_dimensions", 3, "int64", True)],
    "TriangularSolveOptions": [
        ("left_side", 1, "bool"), ("lower", 2, "bool"),
        ("unit_diagonal", 3, "bool"),
        ("transpose_a", 4, "TriangularSolveOptions.Transpose")],
    "CholeskyOptions": [("lower", 1, "bool")],
    "FrontendAttributes": [("map", 1, "map<string,string>")],
    # OpSharding: named_sharding (14) is left out.
    "OpSharding": [
        ("type", 1, "int32"), ("tile_shape", 2, "ShapeProto"),
        ("tile_assignment_dimensions", 3, "int64", True),
        ("tile_assignment_devices", 4, "int64", True),
        ("tuple_shardings", 5, "OpSharding", True),
        ("replicate_on_last_tile_dim", 6, "bool"),
        ("metadata", 7, "OpMetadata", True),
        ("last_tile_dims", 8, "int32", True),
        ("iota_reshape_dims", 9, "int64", True),
        ("iota_transpose_perm", 10, "int32", True),
        ("is_shard_group", 11, "bool"), ("shard_group_id", 12, "int64"),
        ("shard_group_type", 13, "int32")],
    "ReplicaGroup": [("replica_ids", 1, "int64", True)],
    "IotaReplicaGroupListProto": [
        ("num_replica_groups", 1, "int64"),
        ("num_devices_per_group", 2, "int64"),
        ("iota_reshape_dims", 3, "int64", True),
        ("iota_transpose_perm", 4, "int32", True)],
    "CollectiveDeviceListProto": [
        ("replica_groups", 1, "ReplicaGroup", True),
        ("iota_replica_group_list", 2, "IotaReplicaGroupListProto")],
    "SourceTarget": [("source", 1, "int64"), ("target", 2, "int64")],
    "ResultAccuracy.Tolerance": [
        ("atol", 1, "double"), ("rtol", 2, "double"), ("ulps", 3, "int64")],
    "ResultAccuracy": [
        ("mode", 1, "int32", False, "specs"),
        ("tolerance", 2, "ResultAccuracy.Tolerance", False, "specs")],
    "PrecisionConfig": [
        ("operand_precision", 1, "PrecisionConfig.Precision", True),
        ("algorithm", 2, "PrecisionConfig.Algorithm")],
    "ParameterReplication": [("replicated_at_leaf_buffers", 1, "bool", True)],
    "OutputOperandAliasing": [
        ("output_shape_index", 1, "int64", True),
        ("operand_index", 2, "int64"),
        ("operand_shape_index", 3, "int64", True)],
    "Statistic": [("stat_name", 1, "string"), ("stat_val", 2, "double")],
    "StatisticsViz": [("stat_index_to_visualize", 1, "int64"),
                      ("statistics", 2, "Statistic", True)],
    # ---- service/hlo.proto ----
    "HloInstructionProto.SliceDimensions": [
        ("start", 1, "int64"), ("limit", 2, "int64"), ("stride", 3, "int64")],
    # HloInstructionProto: statistics_viz (82), dot_sparsity (86),
    # original_value (88) and the deprecated all_reduce_id (45) /
    # is_cross_program_prefetch (73) are left out.
    "HloInstructionProto": [
        ("name", 1, "string"), ("opcode", 2, "string"),
        ("shape", 3, "ShapeProto"), ("metadata", 7, "OpMetadata"),
        ("literal", 8, "LiteralProto"), ("parameter_number", 9, "int64"),
        ("fusion_kind", 11, "string"), ("tuple_index", 13, "int64"),
        ("dimensions", 14, "int64", True), ("window", 15, "Window"),
        ("convolution_dimension_numbers", 16, "ConvolutionDimensionNumbers"),
        ("feature_group_count", 50, "int64"),
        ("batch_group_count", 58, "int64"),
        ("slice_dimensions", 17, "HloInstructionProto.SliceDimensions", True),
        ("exponent_bits", 18, "int32"), ("mantissa_bits", 19, "int32"),
        ("dynamic_slice_sizes", 20, "int64", True),
        ("padding_config", 21, "PaddingConfig"),
        ("outfeed_config", 22, "bytes"),
        ("distribution", 23, "RandomDistribution"),
        ("epsilon", 24, "float"), ("feature_index", 25, "int64"),
        ("channel_id", 26, "int64"), ("infeed_config", 27, "bytes"),
        ("custom_call_target", 28, "string"),
        ("outfeed_shape", 29, "ShapeProto"),
        ("dot_dimension_numbers", 30, "DotDimensionNumbers"),
        ("ragged_dot_dimension_numbers", 90, "RaggedDotDimensionNumbers"),
        ("fft_type", 31, "FftType"), ("fft_length", 32, "int64", True),
        ("comparison_direction", 63, "string"),
        ("gather_dimension_numbers", 33, "GatherDimensionNumbers"),
        ("gather_slice_sizes", 34, "int64", True),
        ("id", 35, "int64"), ("operand_ids", 36, "int64", True),
        ("control_predecessor_ids", 37, "int64", True),
        ("called_computation_ids", 38, "int64", True),
        ("sharding", 40, "OpSharding"), ("backend_config", 43, "bytes"),
        ("replica_groups", 49, "ReplicaGroup", True),
        ("use_global_device_ids", 71, "bool"),
        ("is_host_transfer", 47, "bool"), ("is_stable", 60, "bool"),
        ("scatter_dimension_numbers", 48, "ScatterDimensionNumbers"),
        ("precision_config", 51, "PrecisionConfig"),
        ("source_target_pairs", 52, "SourceTarget", True),
        ("domain_entry_sharding", 54, "OpSharding"),
        ("domain_exit_sharding", 55, "OpSharding"),
        ("constrain_layout", 56, "bool"),
        ("operand_shapes_with_layout", 57, "ShapeProto", True),
        ("triangular_solve_options", 59, "TriangularSolveOptions"),
        ("cholesky_options", 62, "CholeskyOptions"),
        ("parameter_replication", 61, "ParameterReplication"),
        ("custom_call_has_side_effect", 65, "bool"),
        ("output_operand_aliasing", 74, "OutputOperandAliasing", True),
        ("custom_call_schedule", 76, "CustomCallSchedule"),
        ("delta", 66, "int64"), ("indices_are_sorted", 67, "bool"),
        ("frontend_attributes", 68, "FrontendAttributes"),
        ("unique_indices", 69, "bool"),
        ("rng_algorithm", 70, "RandomAlgorithm"),
        ("comparison_type", 72, "string"),
        ("cross_program_prefetch_index", 80, "int32", False,
         "optional_cross_program_prefetch_index"),
        ("padding_type", 75, "PaddingType"),
        ("custom_call_api_version", 77, "CustomCallApiVersion"),
        ("async_execution_thread", 79, "string"),
        ("k", 81, "int64"), ("largest", 85, "bool"),
        ("collective_device_list", 87, "CollectiveDeviceListProto"),
        ("is_composite", 89, "bool"),
        ("result_accuracy", 91, "ResultAccuracy"),
        ("statistics_viz", 82, "StatisticsViz")],
    "HloComputationProto": [
        ("name", 1, "string"),
        ("instructions", 2, "HloInstructionProto", True),
        ("program_shape", 4, "ProgramShapeProto"), ("id", 5, "int64"),
        ("root_id", 6, "int64"), ("is_fusion_computation", 7, "bool"),
        ("execution_thread", 8, "string")],
    "HloScheduleProto.InstructionSequence": [
        ("instruction_ids", 1, "int64", True)],
    "HloScheduleProto": [
        ("sequences", 1, "map<int64,HloScheduleProto.InstructionSequence>")],
    "HloInputOutputAliasProto.AliasEntryProto": [
        ("output_shape_index", 1, "int64", True),
        ("parameter_number", 2, "int64"),
        ("parameter_shape_index", 3, "int64", True),
        ("kind", 4, "int32")],  # Kind: 0 undefined, 1 may, 2 must alias
    "HloInputOutputAliasProto": [
        ("entries", 1, "HloInputOutputAliasProto.AliasEntryProto", True)],
    "HloBufferDonorProto.BufferDonorEntryProto": [
        ("parameter_number", 1, "int64"),
        ("parameter_shape_index", 2, "int64", True)],
    "HloBufferDonorProto": [
        ("entries", 1, "HloBufferDonorProto.BufferDonorEntryProto", True)],
    "CrossProgramPrefetch": [
        ("parameter", 1, "int64"), ("index", 2, "int64", True),
        ("offset", 3, "int64")],
    "StackFrameIndexProto.FileLocation": [
        ("file_name_id", 1, "int32"), ("function_name_id", 2, "int32"),
        ("line", 3, "int32"), ("column", 4, "int32"),
        ("end_line", 5, "int32"), ("end_column", 6, "int32")],
    "StackFrameIndexProto.StackFrame": [
        ("file_location_id", 1, "int32"), ("parent_frame_id", 2, "int32")],
    "StackFrameIndexProto": [
        ("file_names", 1, "string", True),
        ("function_names", 2, "string", True),
        ("file_locations", 3, "StackFrameIndexProto.FileLocation", True),
        ("stack_frames", 4, "StackFrameIndexProto.StackFrame", True)],
    # HloModuleProto: profile_info (13) and device_assignment (15) are left
    # out.
    "HloModuleProto": [
        ("name", 1, "string"), ("entry_computation_name", 2, "string"),
        ("entry_computation_id", 6, "int64"),
        ("computations", 3, "HloComputationProto", True),
        ("host_program_shape", 4, "ProgramShapeProto"), ("id", 5, "int64"),
        ("schedule", 7, "HloScheduleProto"),
        ("input_output_alias", 8, "HloInputOutputAliasProto"),
        ("buffer_donor", 18, "HloBufferDonorProto"),
        ("cross_program_prefetches", 10, "CrossProgramPrefetch", True),
        ("is_dynamic", 11, "bool"),
        ("spmd_output_sharding", 12, "OpSharding"),
        ("spmd_parameters_shardings", 14, "OpSharding", True),
        ("use_auto_spmd_partitioning", 16, "bool"),
        ("stack_frame_index", 17, "StackFrameIndexProto"),
        ("frontend_attributes", 19, "FrontendAttributes")],
}

_PACKAGE = "xla"
_FILE_NAME = "xla/hlo/proto/hlo_subset.proto"  # private pool: any name


def _add_enum(container, name: str, py_enum: type[enum.IntEnum]) -> None:
  e = container.add(name=name)
  for member in py_enum:
    e.value.add(name=member.name, number=int(member.value))


def _camel(name: str) -> str:
  return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _set_type(field, type_name: str) -> None:
  if type_name in _SCALARS:
    field.type = _SCALARS[type_name]
    return
  first = type_name.split(".")[0]
  is_enum = type_name in _ENUMS or any(
      type_name == f"{outer}.{inner}"
      for outer, inner_map in _NESTED_ENUMS.items() for inner in inner_map)
  field.type = _F.TYPE_ENUM if is_enum else _F.TYPE_MESSAGE
  del first
  field.type_name = f".{_PACKAGE}.{type_name}"


def _build_file() -> descriptor_pb2.FileDescriptorProto:
  fdp = descriptor_pb2.FileDescriptorProto(
      name=_FILE_NAME, package=_PACKAGE, syntax="proto3")
  for name, py_enum in _ENUMS.items():
    _add_enum(fdp.enum_type, name, py_enum)
  protos: dict[str, descriptor_pb2.DescriptorProto] = {}
  # Outer messages first so that nested ones can be attached to them.
  for full in sorted(_MESSAGES, key=lambda n: n.count(".")):
    outer, _, inner = full.rpartition(".")
    parent = protos[outer].nested_type if outer else fdp.message_type
    protos[full] = parent.add(name=inner)
  for outer, inner_map in _NESTED_ENUMS.items():
    for inner, py_enum in inner_map.items():
      _add_enum(protos[outer].enum_type, inner, py_enum)
  for full, fields in _MESSAGES.items():
    msg = protos[full]
    oneofs: dict[str, int] = {}
    for spec in fields:
      fname, number, type_name = spec[:3]
      repeated = len(spec) > 3 and spec[3]
      field = msg.field.add(name=fname, number=number,
                            label=_REP if repeated else _OPT)
      if type_name.startswith("map<"):
        key_type, value_type = type_name[4:-1].split(",")
        entry = msg.nested_type.add(name=_camel(fname) + "Entry")
        entry.options.map_entry = True
        _set_type(entry.field.add(name="key", number=1, label=_OPT), key_type)
        _set_type(entry.field.add(name="value", number=2, label=_OPT),
                  value_type)
        field.label = _REP
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{full}.{entry.name}"
        continue
      _set_type(field, type_name)
      if len(spec) > 4:
        if spec[4] not in oneofs:
          oneofs[spec[4]] = len(msg.oneof_decl)
          msg.oneof_decl.add(name=spec[4])
        field.oneof_index = oneofs[spec[4]]
  return fdp


_POOL = descriptor_pool.DescriptorPool()
_FILE = _POOL.Add(_build_file())


def message_class(name: str):
  """The message class of `xla.<name>` (e.g. "HloModuleProto")."""
  return message_factory.GetMessageClass(
      _POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


HloModuleProto = message_class("HloModuleProto")
HloComputationProto = message_class("HloComputationProto")
HloInstructionProto = message_class("HloInstructionProto")
ShapeProto = message_class("ShapeProto")
LayoutProto = message_class("LayoutProto")
ProgramShapeProto = message_class("ProgramShapeProto")
LiteralProto = message_class("LiteralProto")
OpMetadata = message_class("OpMetadata")
OpSharding = message_class("OpSharding")
Window = message_class("Window")
