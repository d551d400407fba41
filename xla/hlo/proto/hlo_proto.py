"""HloModule <-> HloModuleProto (xla/service/hlo.proto) as bytes.

`hlo_module_from_proto` reads a serialized (or parsed) HloModuleProto, e.g.
the program of a PJRT compile call in format "hlo", into our HLO IR;
`hlo_module_to_proto` writes one. The proto is only a wire format: nothing
past this module sees a protobuf message.

Instruction attributes map to proto fields by opcode (see `_IMPORT` /
`_export_attrs`). Proto fields the IR cannot hold raise
support.UnimplementedError naming the field; bytes that do not parse raise
support.InvalidArgumentError.
"""

from __future__ import annotations

from typing import Union

from google.protobuf import message as pb_message
from google.protobuf import unknown_fields

import support
from xla import xla_data
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_opcode
from xla.hlo.ir import hlo_sharding
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_module import BufferDonor
from xla.hlo.ir.hlo_module import HloModule
from xla.hlo.ir.hlo_module import InputOutputAlias
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.proto import _literal_proto as lp_util
from xla.hlo.proto import hlo_proto_schema as schema
from xla.xla_data import PrimitiveType

O = HloOpcode


def _unknown(msg, what: str) -> None:
  numbers = sorted({f.field_number
                    for f in unknown_fields.UnknownFieldSet(msg)})
  if numbers:
    raise support.UnimplementedError(
        f"Unimplemented: {what} has proto field(s) number "
        f"{', '.join(map(str, numbers))} that the HLO IR does not support")


# -- sharding (kept as HLO text in the IR) -------------------------------------


def _sharding_text(sp) -> str:
  # As XLA prints an instruction's sharding (with its metadata).
  return hlo_sharding.HloSharding.from_proto(sp).to_string(
      include_metadata=True)


def _sharding_proto(text: str, sp) -> None:
  sp.CopyFrom(hlo_sharding.HloSharding.parse(text).to_proto())


# -- result accuracy (kept as HLO text in the IR) ------------------------------


def _accuracy_text(rp) -> str:
  if rp.HasField("tolerance"):
    t = rp.tolerance
    return f"{{tolerance={{atol={t.atol:g},rtol={t.rtol:g},ulps={t.ulps}}}}}"
  return "{mode=" + ("highest" if rp.mode == 1 else "default") + "}"


def _accuracy_proto(text: str, rp) -> None:
  compact = text.replace(" ", "")
  if compact == "{mode=highest}":
    rp.mode = 1
  elif compact == "{mode=default}":
    rp.mode = 0
  elif compact.startswith("{tolerance={") and compact.endswith("}}"):
    fields = dict(kv.split("=") for kv in compact[12:-2].split(","))
    rp.tolerance.atol = float(fields.get("atol", 0))
    rp.tolerance.rtol = float(fields.get("rtol", 0))
    rp.tolerance.ulps = int(fields.get("ulps", 0))
  else:
    raise support.UnimplementedError(
        f"Unimplemented: result_accuracy {text} in an HloModuleProto")


# -- import --------------------------------------------------------------------


def _ints(values) -> tuple[int, ...]:
  return tuple(int(v) for v in values)


def _window(wp) -> xla_data.Window:
  return xla_data.Window(tuple(
      xla_data.WindowDimension(d.size, d.stride, d.padding_low, d.padding_high,
                               d.window_dilation, d.base_dilation,
                               d.window_reversal) for d in wp.dimensions))


def _conv_dnums(cp) -> xla_data.ConvolutionDimensionNumbers:
  return xla_data.ConvolutionDimensionNumbers(
      cp.input_batch_dimension, cp.input_feature_dimension,
      _ints(cp.input_spatial_dimensions), cp.kernel_input_feature_dimension,
      cp.kernel_output_feature_dimension, _ints(cp.kernel_spatial_dimensions),
      cp.output_batch_dimension, cp.output_feature_dimension,
      _ints(cp.output_spatial_dimensions))


def _aliasing(ip) -> tuple:
  return tuple(xla_data.OutputOperandAliasing(
      _ints(a.output_shape_index), a.operand_index,
      _ints(a.operand_shape_index)) for a in ip.output_operand_aliasing)


def _replica_groups(ip):
  if ip.HasField("collective_device_list"):
    cl = ip.collective_device_list
    if cl.HasField("iota_replica_group_list"):
      il = cl.iota_replica_group_list
      return xla_data.IotaReplicaGroupList(
          il.num_replica_groups, il.num_devices_per_group,
          _ints(il.iota_reshape_dims), _ints(il.iota_transpose_perm))
    return tuple(_ints(g.replica_ids) for g in cl.replica_groups)
  return tuple(_ints(g.replica_ids) for g in ip.replica_groups)


def _dot_attrs(dp) -> dict:
  return {"lhs_contracting_dims": _ints(dp.lhs_contracting_dimensions),
          "rhs_contracting_dims": _ints(dp.rhs_contracting_dimensions),
          "lhs_batch_dims": _ints(dp.lhs_batch_dimensions) or None,
          "rhs_batch_dims": _ints(dp.rhs_batch_dimensions) or None}


def _precision_attrs(ip, with_algorithm=True) -> dict:
  pc = ip.precision_config
  out = {"operand_precision": tuple(xla_data.Precision(p)
                                    for p in pc.operand_precision) or None}
  if with_algorithm and pc.algorithm:
    out["algorithm"] = xla_data.PrecisionAlgorithm(pc.algorithm)
  return out


def _default_comparison_type(et: PrimitiveType) -> str:
  from xla import primitive_util  # pylint: disable=g-import-not-at-top
  if primitive_util.is_floating_point(et) or primitive_util.is_complex(et):
    return "FLOAT"
  if primitive_util.is_signed_integral(et):
    return "SIGNED"
  return "UNSIGNED"


def _import_attrs(ip, instr: HloInstruction, operands, called) -> dict:
  """The IR attributes of instruction proto `ip` (its opcode's fields)."""
  op = instr.opcode
  names = {s.name for s in hlo_attrs.attr_specs(op)}
  a: dict = {}
  if "dimensions" in names and op != O.kScan:
    a["dimensions"] = _ints(ip.dimensions)
  if op == O.kReshape and ip.dimensions:
    a["inferred_dimension"] = ip.dimensions[0]
  if op == O.kIota:
    a["iota_dimension"] = ip.dimensions[0] if ip.dimensions else 0
  if op == O.kGetTupleElement:
    a["index"] = ip.tuple_index
  if op == O.kCompare:
    a["direction"] = ip.comparison_direction
    if ip.comparison_type and ip.comparison_type != _default_comparison_type(
        operands[0].shape.element_type):
      a["type"] = ip.comparison_type
  if op == O.kSlice:
    a["slice"] = tuple((d.start, d.limit, d.stride)
                       for d in ip.slice_dimensions)
  if op == O.kDynamicSlice:
    a["dynamic_slice_sizes"] = _ints(ip.dynamic_slice_sizes)
  if op == O.kPad:
    a["padding"] = xla_data.PaddingConfig(tuple(
        xla_data.PaddingDimension(d.edge_padding_low, d.edge_padding_high,
                                  d.interior_padding)
        for d in ip.padding_config.dimensions))
  if "window" in names and ip.HasField("window"):
    a["window"] = _window(ip.window)
  if "dim_labels" in names and ip.HasField("convolution_dimension_numbers"):
    a["dim_labels"] = _conv_dnums(ip.convolution_dimension_numbers)
  if "feature_group_count" in names:
    a["feature_group_count"] = ip.feature_group_count or 1
    a["batch_group_count"] = ip.batch_group_count or 1
  if op in (O.kDot, O.kScaledDot):
    a.update(_dot_attrs(ip.dot_dimension_numbers))
  if op == O.kRaggedDot:
    rp = ip.ragged_dot_dimension_numbers
    a.update(_dot_attrs(rp.dot_dimension_numbers))
    a["lhs_ragged_dims"] = _ints(rp.lhs_ragged_dimensions)
    a["rhs_group_dims"] = _ints(rp.rhs_group_dimensions)
  if "operand_precision" in names:
    a.update(_precision_attrs(ip, "algorithm" in names))
  if op == O.kGather:
    g = ip.gather_dimension_numbers
    a.update(offset_dims=_ints(g.offset_dims),
             collapsed_slice_dims=_ints(g.collapsed_slice_dims),
             start_index_map=_ints(g.start_index_map),
             operand_batching_dims=_ints(g.operand_batching_dims),
             start_indices_batching_dims=_ints(g.start_indices_batching_dims),
             index_vector_dim=g.index_vector_dim,
             slice_sizes=_ints(ip.gather_slice_sizes),
             indices_are_sorted=ip.indices_are_sorted)
  if op == O.kScatter:
    s = ip.scatter_dimension_numbers
    a.update(update_window_dims=_ints(s.update_window_dims),
             inserted_window_dims=_ints(s.inserted_window_dims),
             scatter_dims_to_operand_dims=_ints(
                 s.scatter_dims_to_operand_dims),
             input_batching_dims=_ints(s.input_batching_dims),
             scatter_indices_batching_dims=_ints(
                 s.scatter_indices_batching_dims),
             index_vector_dim=s.index_vector_dim,
             indices_are_sorted=ip.indices_are_sorted,
             unique_indices=ip.unique_indices)
  if op == O.kSort:
    a["is_stable"] = ip.is_stable
  if op == O.kTopK:
    a.update(k=ip.k, largest=ip.largest)
  if op == O.kFusion:
    a["kind"] = ip.fusion_kind
  if "output_to_operand_aliasing" in names:
    a["output_to_operand_aliasing"] = _aliasing(ip)
  if op == O.kFft:
    a.update(fft_type=xla_data.FftType(ip.fft_type),
             fft_length=_ints(ip.fft_length))
  if op == O.kTriangularSolve:
    t = ip.triangular_solve_options
    a.update(left_side=t.left_side, lower=t.lower,
             unit_diagonal=t.unit_diagonal,
             transpose_a=xla_data.Transpose(t.transpose_a))
  if op == O.kCholesky:
    a["lower"] = ip.cholesky_options.lower
  if op in (O.kBatchNormTraining, O.kBatchNormInference, O.kBatchNormGrad):
    a.update(epsilon=float(ip.epsilon), feature_index=ip.feature_index)
  if op == O.kReducePrecision:
    a.update(exponent_bits=ip.exponent_bits, mantissa_bits=ip.mantissa_bits)
  if op == O.kRng:
    a["distribution"] = xla_data.RandomDistribution(ip.distribution)
  if op == O.kRngBitGenerator:
    a["algorithm"] = xla_data.RandomAlgorithm(ip.rng_algorithm)
  if op == O.kRngGetAndUpdateState:
    a["delta"] = ip.delta
  if op == O.kInfeed:
    a["infeed_config"] = ip.infeed_config.decode("utf-8", "surrogateescape")
  if op == O.kOutfeed:
    a["outfeed_config"] = ip.outfeed_config.decode("utf-8", "surrogateescape")
    if ip.HasField("outfeed_shape"):
      a["outfeed_shape"] = lp_util.shape_from_proto(ip.outfeed_shape)
  if "channel_id" in names and ip.channel_id > 0:
    a["channel_id"] = ip.channel_id
  if "is_host_transfer" in names:
    a["is_host_transfer"] = ip.is_host_transfer
  if "replica_groups" in names:
    a["replica_groups"] = _replica_groups(ip)
  if "constrain_layout" in names and op != O.kCustomCall:
    a["constrain_layout"] = ip.constrain_layout
  if "use_global_device_ids" in names:
    a["use_global_device_ids"] = ip.use_global_device_ids
  if "source_target_pairs" in names:
    a["source_target_pairs"] = tuple((p.source, p.target)
                                     for p in ip.source_target_pairs)
  if "async_execution_thread" in names:
    a["async_execution_thread"] = ip.async_execution_thread or "main"
  if op == O.kCopyStart and ip.HasField("cross_program_prefetch_index"):
    a["cross_program_prefetch_index"] = ip.cross_program_prefetch_index
  if op == O.kCall:
    a["is_composite"] = ip.is_composite
  if "result_accuracy" in names and ip.HasField("result_accuracy"):
    a["result_accuracy"] = hlo_attrs.RawText(
        _accuracy_text(ip.result_accuracy))
  if op == O.kCustomCall:
    a["custom_call_target"] = ip.custom_call_target
    if ip.constrain_layout:
      a["operand_layout_constraints"] = tuple(
          lp_util.shape_from_proto(s) for s in ip.operand_shapes_with_layout)
    a["custom_call_has_side_effect"] = ip.custom_call_has_side_effect
    if ip.HasField("literal"):
      a["literal"] = lp_util.literal_from_proto(ip.literal)
    if ip.padding_type:
      a["padding_type"] = xla_data.PaddingType(ip.padding_type)
    a["schedule"] = xla_data.CustomCallSchedule(ip.custom_call_schedule)
    a["api_version"] = xla_data.CustomCallApiVersion(
        ip.custom_call_api_version or 1)
    if len(called) == 1:
      a["to_apply"] = called[0]
    elif called:
      a["called_computations"] = tuple(called)
    called = ()
  # Called computations, in XLA's order.
  if op == O.kConditional:
    if operands and operands[0].shape.element_type == PrimitiveType.PRED:
      if len(called) != 2:
        raise support.InvalidArgumentError(
            f"PRED conditional {ip.name} needs 2 called computations")
      a["true_computation"], a["false_computation"] = called
    else:
      a["branch_computations"] = tuple(called)
  elif op != O.kCustomCall:
    comp_names = [n for n in hlo_attrs.computation_attr_names(op)]
    if op == O.kWhile:
      comp_names = ["body", "condition"]
    if len(called) > len(comp_names):
      raise support.InvalidArgumentError(
          f"{op.value} {ip.name} calls {len(called)} computations")
    for n, c in zip(comp_names, called):
      a[n] = c
  return a


def _metadata_from_proto(mp) -> xla_data.OpMetadata:
  return xla_data.OpMetadata(
      op_type=mp.op_type, op_name=mp.op_name, source_file=mp.source_file,
      source_line=mp.source_line, source_end_line=mp.source_end_line,
      source_column=mp.source_column, source_end_column=mp.source_end_column,
      profile_type=_ints(mp.profile_type),
      deduplicated_name=mp.deduplicated_name,
      scheduling_name=mp.scheduling_name, stack_frame_id=mp.stack_frame_id)


def _parse(data) -> "schema.HloModuleProto":
  if isinstance(data, (bytes, bytearray, memoryview)):
    proto = schema.HloModuleProto()
    try:
      proto.ParseFromString(bytes(data))
    except (pb_message.DecodeError, RuntimeError, ValueError) as e:
      raise support.InvalidArgumentError(
          f"malformed HloModuleProto bytes: {e}") from None
    return proto
  if isinstance(data, pb_message.Message) and (
      data.DESCRIPTOR.full_name == "xla.HloModuleProto"):
    if isinstance(data, schema.HloModuleProto):
      return data
    return _parse(data.SerializeToString())
  raise support.InvalidArgumentError(
      f"expected HloModuleProto bytes or message, got {type(data).__name__}")


def hlo_module_from_proto(data: Union[bytes, pb_message.Message]
                          ) -> HloModule:
  """Reads an HloModuleProto (bytes or message) into an HloModule."""
  proto = _parse(data)
  try:
    return _module_from_proto(proto)
  except support.XlaError:
    raise
  except (ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
    raise support.InvalidArgumentError(
        f"invalid HloModuleProto: {type(e).__name__}: {e}") from None


def _module_from_proto(proto) -> HloModule:
  _unknown(proto, "HloModuleProto")
  if proto.cross_program_prefetches:
    raise support.UnimplementedError(
        "Unimplemented: HloModuleProto field cross_program_prefetches")
  for field in ("spmd_output_sharding",):
    if proto.HasField(field):
      raise support.UnimplementedError(
          f"Unimplemented: HloModuleProto field {field}")
  if proto.spmd_parameters_shardings:
    raise support.UnimplementedError(
        "Unimplemented: HloModuleProto field spmd_parameters_shardings")
  module = HloModule(proto.name or "module")
  comps_by_id: dict[int, HloComputation] = {}
  created = []
  entry = None
  for cp in proto.computations:
    _unknown(cp, f"computation {cp.name}")
    if cp.id in comps_by_id:
      raise support.InvalidArgumentError(
          f"duplicate computation id {cp.id} ({cp.name})")
    comp = _computation_from_proto(cp, comps_by_id)
    comps_by_id[cp.id] = comp
    created.append(comp)
    if (proto.entry_computation_id and cp.id == proto.entry_computation_id
        ) or (not proto.entry_computation_id and
              cp.name == proto.entry_computation_name):
      entry = comp
  if not created:
    raise support.InvalidArgumentError("HloModuleProto has no computations")
  entry = entry or created[-1]
  for comp in created:
    module.add_computation(comp, is_entry=comp is entry)
  if proto.HasField("host_program_shape"):
    module.config.entry_computation_layout = (
        lp_util.program_shape_from_proto(proto.host_program_shape))
  module.is_scheduled = bool(proto.HasField("schedule") and
                             proto.schedule.sequences)
  for e in proto.input_output_alias.entries:
    module.input_output_aliases.append(InputOutputAlias(
        _ints(e.output_shape_index), e.parameter_number,
        _ints(e.parameter_shape_index), must_alias=e.kind == 2))
  for e in proto.buffer_donor.entries:
    module.buffer_donors.append(BufferDonor(
        e.parameter_number, _ints(e.parameter_shape_index)))
  module.frontend_attributes = dict(proto.frontend_attributes.map)
  if proto.HasField("stack_frame_index"):
    sf = proto.stack_frame_index
    module.stack_frame_index = xla_data.StackFrameIndex(
        tuple(sf.file_names), tuple(sf.function_names),
        tuple(xla_data.FileLocation(f.file_name_id, f.function_name_id,
                                    f.line, f.end_line, f.column,
                                    f.end_column)
              for f in sf.file_locations),
        tuple(xla_data.StackFrame(s.file_location_id, s.parent_frame_id)
              for s in sf.stack_frames))
  return module


def _computation_from_proto(cp, comps_by_id) -> HloComputation:
  comp = HloComputation(cp.name)
  if cp.execution_thread:
    comp.execution_thread = cp.execution_thread
  by_id: dict[int, HloInstruction] = {}
  for ip in cp.instructions:
    _unknown(ip, f"instruction {ip.name}")
    try:
      opcode = hlo_opcode.string_to_opcode(ip.opcode)
    except support.XlaError:
      raise support.InvalidArgumentError(
          f"instruction {ip.name} has unknown opcode '{ip.opcode}'") from None
    if opcode == O.kScan:
      raise support.UnimplementedError(
          "Unimplemented: opcode scan in an HloModuleProto")
    if opcode in (O.kDomain,):
      raise support.UnimplementedError(
          f"Unimplemented: opcode {opcode.value} in an HloModuleProto")
    if ip.statistics_viz.statistics:
      raise support.UnimplementedError(
          f"Unimplemented: field statistics_viz of instruction {ip.name}")
    if ip.id in by_id:
      raise support.InvalidArgumentError(
          f"duplicate instruction id {ip.id} ({ip.name})")
    try:
      operands = [by_id[i] for i in ip.operand_ids]
    except KeyError as e:
      raise support.InvalidArgumentError(
          f"instruction {ip.name} uses unknown operand id {e}") from None
    try:
      called = [comps_by_id[i] for i in ip.called_computation_ids]
    except KeyError as e:
      raise support.InvalidArgumentError(
          f"instruction {ip.name} calls unknown computation id {e} (callees "
          f"must precede callers)") from None
    instr = HloInstruction(opcode, lp_util.shape_from_proto(ip.shape),
                           operands, name=ip.name)
    if opcode == O.kParameter:
      instr.parameter_number = ip.parameter_number
    elif opcode == O.kConstant:
      if not ip.HasField("literal"):
        raise support.InvalidArgumentError(
            f"constant {ip.name} has no literal")
      instr.literal = lp_util.literal_from_proto(ip.literal)
    for key, value in _import_attrs(ip, instr, operands, called).items():
      instr.set_attr(key, value)
    instr.metadata = _metadata_from_proto(ip.metadata)
    instr.frontend_attributes = dict(ip.frontend_attributes.map)
    instr.backend_config = ip.backend_config.decode("utf-8",
                                                    "surrogateescape")
    if ip.HasField("sharding"):
      instr.sharding = hlo_attrs.RawText(_sharding_text(ip.sharding))
    if ip.parameter_replication.replicated_at_leaf_buffers:
      instr.parameter_replication = tuple(
          ip.parameter_replication.replicated_at_leaf_buffers)
    for pid in ip.control_predecessor_ids:
      if pid not in by_id:
        raise support.InvalidArgumentError(
            f"instruction {ip.name} has unknown control predecessor {pid}")
      by_id[pid].add_control_dependency_to(instr)
    comp.add_instruction(instr)
    by_id[ip.id] = instr
  if cp.root_id not in by_id:
    raise support.InvalidArgumentError(
        f"computation {cp.name} has unknown root id {cp.root_id}")
  comp.set_root_instruction(by_id[cp.root_id])
  return comp


# -- export --------------------------------------------------------------------


def _set_dot(dp, instr) -> None:
  dp.lhs_contracting_dimensions.extend(instr.attr("lhs_contracting_dims"))
  dp.rhs_contracting_dimensions.extend(instr.attr("rhs_contracting_dims"))
  dp.lhs_batch_dimensions.extend(instr.attr("lhs_batch_dims") or ())
  dp.rhs_batch_dimensions.extend(instr.attr("rhs_batch_dims") or ())


def _export_attrs(instr: HloInstruction, ip, comp_ids) -> None:
  op = instr.opcode
  handled = set()
  for name, value in instr.attrs.items():
    handled.add(name)
    if name == "dimensions":
      ip.dimensions.extend(value)
    elif name == "inferred_dimension":
      if value != -1:
        ip.dimensions.append(value)
    elif name == "iota_dimension":
      ip.dimensions.append(value)
    elif name == "index":
      ip.tuple_index = value
    elif name == "direction":
      ip.comparison_direction = value.name
    elif name == "type":
      ip.comparison_type = value.value
    elif name == "slice":
      for s, l, st in value:
        ip.slice_dimensions.add(start=s, limit=l, stride=st)
    elif name == "dynamic_slice_sizes":
      ip.dynamic_slice_sizes.extend(value)
    elif name == "padding":
      for d in value.dimensions:
        ip.padding_config.dimensions.add(
            edge_padding_low=d.edge_padding_low,
            edge_padding_high=d.edge_padding_high,
            interior_padding=d.interior_padding)
    elif name == "window":
      ip.window.SetInParent()
      for d in value.dimensions:
        ip.window.dimensions.add(
            size=d.size, stride=d.stride, padding_low=d.padding_low,
            padding_high=d.padding_high, window_dilation=d.window_dilation,
            base_dilation=d.base_dilation, window_reversal=d.window_reversal)
    elif name == "dim_labels":
      cp = ip.convolution_dimension_numbers
      for f in ("input_batch_dimension", "input_feature_dimension",
                "kernel_input_feature_dimension",
                "kernel_output_feature_dimension", "output_batch_dimension",
                "output_feature_dimension"):
        setattr(cp, f, getattr(value, f))
      cp.input_spatial_dimensions.extend(value.input_spatial_dimensions)
      cp.kernel_spatial_dimensions.extend(value.kernel_spatial_dimensions)
      cp.output_spatial_dimensions.extend(value.output_spatial_dimensions)
    elif name in ("feature_group_count", "batch_group_count", "k", "delta",
                  "exponent_bits", "mantissa_bits", "feature_index",
                  "epsilon", "is_stable", "largest", "indices_are_sorted",
                  "unique_indices", "custom_call_target",
                  "custom_call_has_side_effect", "is_host_transfer",
                  "use_global_device_ids", "channel_id", "is_composite",
                  "cross_program_prefetch_index"):
      setattr(ip, name, value)
    elif name == "constrain_layout":
      ip.constrain_layout = value
    elif name == "async_execution_thread":
      ip.async_execution_thread = value
    elif name in ("lhs_contracting_dims", "rhs_contracting_dims",
                  "lhs_batch_dims", "rhs_batch_dims", "lhs_ragged_dims",
                  "rhs_group_dims"):
      pass  # written below as one message
    elif name in ("operand_precision", "algorithm") and op != (
        O.kRngBitGenerator):
      pc = ip.precision_config
      if name == "operand_precision":
        pc.operand_precision.extend(int(p) for p in value)
      else:
        pc.algorithm = int(value)
    elif name == "algorithm":
      ip.rng_algorithm = int(value)
    elif name in ("offset_dims", "collapsed_slice_dims", "start_index_map",
                  "operand_batching_dims", "start_indices_batching_dims"):
      getattr(ip.gather_dimension_numbers, name).extend(value)
    elif name == "index_vector_dim":
      target = (ip.gather_dimension_numbers if op == O.kGather
                else ip.scatter_dimension_numbers)
      target.index_vector_dim = value
    elif name == "slice_sizes" and op == O.kGather:
      ip.gather_slice_sizes.extend(value)
    elif name in ("update_window_dims", "inserted_window_dims",
                  "scatter_dims_to_operand_dims", "input_batching_dims",
                  "scatter_indices_batching_dims"):
      getattr(ip.scatter_dimension_numbers, name).extend(value)
    elif name == "kind":
      ip.fusion_kind = value.value
    elif name == "output_to_operand_aliasing":
      for al in value:
        e = ip.output_operand_aliasing.add(operand_index=al.operand_index)
        e.output_shape_index.extend(al.output_shape_index)
        e.operand_shape_index.extend(al.operand_shape_index)
    elif name == "fft_type":
      ip.fft_type = int(value)
    elif name == "fft_length":
      ip.fft_length.extend(value)
    elif name in ("left_side", "unit_diagonal", "transpose_a") or (
        name == "lower" and op == O.kTriangularSolve):
      setattr(ip.triangular_solve_options, name,
              int(value) if name == "transpose_a" else value)
    elif name == "lower":
      ip.cholesky_options.lower = value
    elif name == "distribution":
      ip.distribution = int(value)
    elif name == "infeed_config":
      ip.infeed_config = value.encode("utf-8", "surrogateescape")
    elif name == "outfeed_config":
      ip.outfeed_config = value.encode("utf-8", "surrogateescape")
    elif name == "outfeed_shape":
      lp_util.shape_to_proto(value, ip.outfeed_shape)
    elif name == "replica_groups":
      if isinstance(value, xla_data.IotaReplicaGroupList):
        il = ip.collective_device_list.iota_replica_group_list
        il.num_replica_groups = value.num_replica_groups
        il.num_devices_per_group = value.num_devices_per_group
        il.iota_reshape_dims.extend(value.iota_reshape_dims)
        il.iota_transpose_perm.extend(value.iota_transpose_perm)
      else:
        for g in value:
          ip.replica_groups.add().replica_ids.extend(g)
    elif name == "source_target_pairs":
      for s, t in value:
        ip.source_target_pairs.add(source=s, target=t)
    elif name == "result_accuracy":
      _accuracy_proto(value.text, ip.result_accuracy)
    elif name == "operand_layout_constraints":
      ip.constrain_layout = True
      for s in value:
        lp_util.shape_to_proto(s, ip.operand_shapes_with_layout.add())
    elif name == "literal":
      lp_util.literal_to_proto(value, ip.literal)
    elif name == "padding_type":
      ip.padding_type = int(value)
    elif name == "schedule":
      ip.custom_call_schedule = int(value)
    elif name == "api_version":
      ip.custom_call_api_version = int(value)
    elif name in hlo_attrs.computation_attr_names(op):
      pass  # written below in XLA's order
    else:
      raise support.UnimplementedError(
          f"Unimplemented: attribute {name} of {op.value} in an "
          f"HloModuleProto")
  if op in (O.kDot, O.kScaledDot):
    _set_dot(ip.dot_dimension_numbers, instr)
  if op == O.kRaggedDot:
    rp = ip.ragged_dot_dimension_numbers
    _set_dot(rp.dot_dimension_numbers, instr)
    rp.lhs_ragged_dimensions.extend(instr.attr("lhs_ragged_dims"))
    rp.rhs_group_dimensions.extend(instr.attr("rhs_group_dims"))
  if op == O.kCustomCall and "api_version" not in instr.attrs:
    ip.custom_call_api_version = 1
  if op == O.kConditional and "branch_computations" not in instr.attrs:
    called = [instr.attrs["true_computation"], instr.attrs["false_computation"]]
  elif op == O.kWhile:
    called = [instr.attrs["body"], instr.attrs["condition"]]
  else:
    called = instr.called_computations()
  ip.called_computation_ids.extend(comp_ids[id(c)] for c in called)


def _instruction_to_proto(instr, ip, ids, comp_ids) -> None:
  ip.name = instr.name
  ip.opcode = instr.opcode.value
  ip.id = ids[id(instr)]
  lp_util.shape_to_proto(instr.shape, ip.shape)
  ip.operand_ids.extend(ids[id(o)] for o in instr.operands)
  ip.control_predecessor_ids.extend(
      ids[id(p)] for p in instr.control_predecessors)
  if instr.opcode == O.kParameter:
    ip.parameter_number = instr.parameter_number
  if instr.opcode == O.kConstant:
    lp_util.literal_to_proto(instr.literal, ip.literal)
    # XLA checks the instruction's shape against its literal's, layouts
    # included (and a literal has one).
    lp_util.with_default_layouts(ip.shape)
  _export_attrs(instr, ip, comp_ids)
  md = instr.metadata
  for f in ("op_type", "op_name", "source_file", "source_line",
            "source_end_line", "source_column", "source_end_column",
            "deduplicated_name", "scheduling_name", "stack_frame_id"):
    setattr(ip.metadata, f, getattr(md, f))
  ip.metadata.profile_type.extend(md.profile_type)
  for k, v in instr.frontend_attributes.items():
    ip.frontend_attributes.map[k] = v
  ip.backend_config = instr.backend_config.encode("utf-8", "surrogateescape")
  if instr.sharding is not None:
    _sharding_proto(instr.sharding.text, ip.sharding)
  if instr.parameter_replication:
    ip.parameter_replication.replicated_at_leaf_buffers.extend(
        instr.parameter_replication)
  for field in ("statistics", "origin"):
    if getattr(instr, field) is not None:
      raise support.UnimplementedError(
          f"Unimplemented: {field} of {instr.name} in an HloModuleProto")


def hlo_module_to_proto(module: HloModule) -> bytes:
  """Serializes `module` as an HloModuleProto."""
  proto = schema.HloModuleProto(name=module.name)
  comps = module.computations_in_stable_order()
  comp_ids = {id(c): i + 1 for i, c in enumerate(comps)}
  next_id = 1
  for comp in comps:
    cp = proto.computations.add(name=comp.name, id=comp_ids[id(comp)])
    if comp.execution_thread != "main":
      cp.execution_thread = comp.execution_thread
    cp.is_fusion_computation = comp.is_fusion_computation()
    order = comp.instructions_in_stable_order()
    ids = {}
    for instr in order:
      ids[id(instr)] = next_id
      next_id += 1
    for instr in order:
      _instruction_to_proto(instr, cp.instructions.add(), ids, comp_ids)
    cp.root_id = ids[id(comp.root_instruction)]
    lp_util.program_shape_to_proto(
        comp.program_shape(), cp.program_shape,
        [p.name for p in comp.parameter_instructions])
    if module.is_scheduled and not comp.is_fusion_computation():
      proto.schedule.sequences[cp.id].instruction_ids.extend(
          ids[id(i)] for i in comp.instructions)
  entry = module.entry_computation
  proto.entry_computation_name = entry.name
  proto.entry_computation_id = comp_ids[id(entry)]
  # XLA requires a name per parameter here too.
  lp_util.program_shape_to_proto(
      module.entry_computation_layout(), proto.host_program_shape,
      [p.name for p in entry.parameter_instructions])
  for a in module.input_output_aliases:
    e = proto.input_output_alias.entries.add(
        parameter_number=a.parameter_number, kind=2 if a.must_alias else 1)
    e.output_shape_index.extend(a.output_index)
    e.parameter_shape_index.extend(a.parameter_index)
  for d in module.buffer_donors:
    e = proto.buffer_donor.entries.add(parameter_number=d.parameter_number)
    e.parameter_shape_index.extend(d.parameter_index)
  for k, v in module.frontend_attributes.items():
    proto.frontend_attributes.map[k] = v
  sf = module.stack_frame_index
  if sf is not None:
    sp = proto.stack_frame_index
    sp.file_names.extend(sf.file_names)
    sp.function_names.extend(sf.function_names)
    for f in sf.file_locations:
      sp.file_locations.add(file_name_id=f.file_name_id,
                            function_name_id=f.function_name_id, line=f.line,
                            end_line=f.end_line, column=f.column,
                            end_column=f.end_column)
    for s in sf.stack_frames:
      sp.stack_frames.add(file_location_id=s.file_location_id,
                          parent_frame_id=s.parent_frame_id)
  return proto.SerializeToString()
