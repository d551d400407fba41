"""XLA's HLO text format: printing modules, computations and instructions.

    HloModule m, entry_computation_layout={(f32[4]{0})->f32[]}

    add {
      x = f32[] parameter(0)
      y = f32[] parameter(1)
      ROOT s = f32[] add(x, y)
    }

    ENTRY e {
      p0 = f32[4]{0} parameter(0)
      c = f32[] constant(0)
      ROOT r = f32[] reduce(p0, c), dimensions={0}, to_apply=add
    }

`HloPrintOptions()` gives this compact form; `HloPrintOptions.long_form()`
adds `%` before names and computation signatures, as XLA's CPU compiler
prints optimized modules. The parser (`xla.hlo.parser.hlo_parser`) reads
both. This module works on duck-typed IR objects so that the IR classes can
import it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from xla import literal as literal_lib
from xla import xla_data
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import text_util
from xla.hlo.ir.hlo_attrs import AttrKind
from xla.shape import Shape


@dataclasses.dataclass(frozen=True)
class HloPrintOptions:
  """What to print; the defaults round-trip through the parser."""

  print_percent: bool = False
  print_program_shape: bool = False
  print_operand_shape: bool = False
  print_metadata: bool = True
  print_backend_config: bool = True
  print_large_constants: bool = True
  print_stack_frame_index: bool = True
  include_layout_in_shapes: bool = True
  # `/*index=N*/` before every Nth operand (0: never).
  operand_index_annotation_interval: int = 0
  # Constants with more elements than this print as `{...}` unless
  # print_large_constants.
  large_constant_threshold: int = 10

  @classmethod
  def long_form(cls) -> "HloPrintOptions":
    """`%name`s, `(params) -> shape` computation signatures and operand
    index annotations, as XLA's compiler prints optimized modules."""
    return cls(print_percent=True, print_program_shape=True,
               operand_index_annotation_interval=5)

  @classmethod
  def short(cls) -> "HloPrintOptions":
    """No metadata, backend configs or stack frames (for diffs and tests)."""
    return cls(print_metadata=False, print_backend_config=False,
               print_stack_frame_index=False)


_DEFAULT = HloPrintOptions()


def _name(name: str, options: HloPrintOptions) -> str:
  return ("%" + name) if options.print_percent else name


def _shape(shape: Shape, options: HloPrintOptions) -> str:
  return shape.to_string(print_layout=options.include_layout_in_shapes)


# -- attribute values ----------------------------------------------------------


def _int_list(values) -> str:
  return "{" + ",".join(str(v) for v in values) + "}"


def dim_labels_to_string(dnums: xla_data.ConvolutionDimensionNumbers) -> str:
  """`b01f_01io->b01f`: the letters of each dimension, spatial ones by
  index; positions no field names print as `?`."""

  def labels(rank, assigned):
    chars = ["?"] * rank
    for pos, ch in assigned:
      if 0 <= pos < rank:
        chars[pos] = ch
    return "".join(chars)

  def side(batch, feature, spatial, letters):
    rank = max([batch, feature, *spatial, -1]) + 1
    assigned = [(batch, letters[0]), (feature, letters[1])]
    assigned += [(pos, str(i)) for i, pos in enumerate(spatial)]
    return labels(max(rank, 2 + len(spatial)), assigned)

  d = dnums
  lhs = side(d.input_batch_dimension, d.input_feature_dimension,
             d.input_spatial_dimensions, "bf")
  rhs = side(d.kernel_input_feature_dimension,
             d.kernel_output_feature_dimension, d.kernel_spatial_dimensions,
             "io")
  out = side(d.output_batch_dimension, d.output_feature_dimension,
             d.output_spatial_dimensions, "bf")
  return f"{lhs}_{rhs}->{out}"


def padding_config_to_string(config: xla_data.PaddingConfig) -> str:
  interior = any(d.interior_padding for d in config.dimensions)
  parts = []
  for d in config.dimensions:
    text = f"{d.edge_padding_low}_{d.edge_padding_high}"
    if interior:
      text += f"_{d.interior_padding}"
    parts.append(text)
  return "x".join(parts)


def slice_ranges_to_string(ranges) -> str:
  strided = any(r[2] != 1 for r in ranges)
  parts = [f"[{r[0]}:{r[1]}:{r[2]}]" if strided else f"[{r[0]}:{r[1]}]"
           for r in ranges]
  return "{" + ", ".join(parts) + "}"


def replica_groups_to_string(groups) -> str:
  if isinstance(groups, xla_data.IotaReplicaGroupList):
    text = (f"[{groups.num_replica_groups},{groups.num_devices_per_group}]"
            f"<=[{','.join(map(str, groups.iota_reshape_dims))}]")
    if len(groups.iota_reshape_dims) > 1:
      text += f"T({','.join(map(str, groups.iota_transpose_perm))})"
    return text
  return "{" + ",".join(_int_list(g) for g in groups) + "}"


def aliasing_to_string(pairs) -> str:
  return "{" + ", ".join(
      f"{_int_list(p.output_shape_index)}: ({p.operand_index}, "
      f"{_int_list(p.operand_shape_index)})" for p in pairs) + "}"


def metadata_to_string(md: xla_data.OpMetadata) -> str:
  parts = []
  for field in ("op_type", "op_name", "source_file"):
    value = getattr(md, field)
    if value:
      parts.append(f"{field}={text_util.quote(value)}")
  for field in ("source_line", "source_end_line", "source_column",
                "source_end_column"):
    value = getattr(md, field)
    if value:
      parts.append(f"{field}={value}")
  if md.profile_type:
    parts.append(f"profile_type={_int_list(md.profile_type)}")
  for field in ("deduplicated_name", "scheduling_name"):
    value = getattr(md, field)
    if value:
      parts.append(f"{field}={text_util.quote(value)}")
  if md.stack_frame_id:
    parts.append(f"stack_frame_id={md.stack_frame_id}")
  return "{" + " ".join(parts) + "}"


def string_or_dict(text: str) -> str:
  return text if text_util.is_json_dict(text) else text_util.quote(text)


def frontend_attributes_to_string(attrs: dict[str, str]) -> str:
  return "{" + ",".join(f"{k}={string_or_dict(v)}"
                        for k, v in sorted(attrs.items())) + "}"


def literal_to_text(literal: literal_lib.Literal) -> str:
  return literal.to_string(print_shape=True, oneline=True)


def attr_value_to_string(spec: hlo_attrs.AttrSpec, value: Any,
                         options: HloPrintOptions = _DEFAULT) -> str:
  """The text after `name=` for one attribute value."""
  kind = spec.kind
  if kind == AttrKind.BOOL:
    return "true" if value else "false"
  if kind == AttrKind.INT:
    return str(value)
  if kind == AttrKind.FLOAT:
    return literal_lib.format_float(value, "float32")
  if kind == AttrKind.STRING:
    return text_util.quote(value)
  if kind == AttrKind.INT_LIST:
    return _int_list(value)
  if kind == AttrKind.INT_LIST_LIST:
    return "{" + ",".join(_int_list(v) for v in value) + "}"
  if kind == AttrKind.ENUM:
    return spec.enum.text(value) if spec.enum is not None else str(value)
  if kind == AttrKind.COMPUTATION:
    return _name(value.name, options)
  if kind == AttrKind.COMPUTATION_LIST:
    return "{" + ", ".join(_name(c.name, options) for c in value) + "}"
  if kind == AttrKind.WINDOW:
    return "{" + value.to_string() + "}"
  if kind == AttrKind.DIM_LABELS:
    return dim_labels_to_string(value)
  if kind == AttrKind.SLICE_RANGES:
    return slice_ranges_to_string(value)
  if kind == AttrKind.PADDING_CONFIG:
    return padding_config_to_string(value)
  if kind == AttrKind.PRECISION_LIST:
    return "{" + ",".join(hlo_attrs.PRECISION.text(p) for p in value) + "}"
  if kind == AttrKind.SHAPE:
    return value.to_string(print_layout=True)
  if kind == AttrKind.SHAPE_LIST:
    return "{" + ", ".join(s.to_string(print_layout=True)
                           for s in value) + "}"
  if kind == AttrKind.LITERAL:
    return literal_to_text(value)
  if kind == AttrKind.ALIASING:
    return aliasing_to_string(value)
  if kind == AttrKind.REPLICA_GROUPS:
    return replica_groups_to_string(value)
  if kind == AttrKind.RAW:
    return value.text
  if kind == AttrKind.FRONTEND_ATTRIBUTES:
    return frontend_attributes_to_string(value)
  if kind == AttrKind.METADATA:
    return metadata_to_string(value)
  if kind == AttrKind.INSTRUCTION_LIST:
    return "{" + ", ".join(_name(i.name, options) for i in value) + "}"
  if kind == AttrKind.BOOL_LIST:
    return "{" + ",".join("true" if b else "false" for b in value) + "}"
  if kind == AttrKind.STRING_OR_DICT:
    return string_or_dict(value)
  raise AssertionError(f"unhandled attribute kind {kind}")


# -- instructions --------------------------------------------------------------


def _operands_text(instr, options: HloPrintOptions) -> str:
  if instr.parameter_number is not None and instr.opcode.value == "parameter":
    return str(instr.parameter_number)
  if instr.literal is not None:
    lit = instr.literal
    if (not options.print_large_constants and lit.shape.is_array() and
        lit.array.size > options.large_constant_threshold):
      return "{...}"
    return lit.to_string(print_shape=False, oneline=True)
  parts = []
  interval = options.operand_index_annotation_interval
  for i, op in enumerate(instr.operands):
    text = _name(op.name, options)
    if options.print_operand_shape:
      text = _shape(op.shape, options) + " " + text
    if interval and i and i % interval == 0:
      text = f"/*index={i}*/" + text
    parts.append(text)
  return ", ".join(parts)


def _common_attrs(instr, options: HloPrintOptions) -> list[str]:
  out = []
  for field, spec in hlo_attrs.COMMON_ATTRS:
    value = getattr(instr, field)
    if field == "metadata":
      if not options.print_metadata or value.is_empty():
        continue
    elif field == "backend_config":
      if not options.print_backend_config or not value:
        continue
    elif not value:
      continue
    out.append(f"{spec.name}={attr_value_to_string(spec, value, options)}")
  return out


def instruction_to_string(instr, options: Optional[HloPrintOptions] = None,
                          is_root: Optional[bool] = None) -> str:
  """One instruction line, without indentation."""
  options = options or _DEFAULT
  if is_root is None:
    is_root = instr.is_root()
  text = (f"{'ROOT ' if is_root else ''}{_name(instr.name, options)} = "
          f"{_shape(instr.shape, options)} {instr.opcode.value}"
          f"({_operands_text(instr, options)})")
  attrs = []
  for spec in hlo_attrs.attr_specs(instr.opcode):
    value = instr.attrs.get(spec.name)
    if not spec.should_print(value):
      continue
    if value is None:
      value = spec.default
    attrs.append(f"{spec.name}={attr_value_to_string(spec, value, options)}")
  attrs += _common_attrs(instr, options)
  if attrs:
    text += ", " + ", ".join(attrs)
  return text


# -- computations and modules --------------------------------------------------


def computation_to_string(comp, options: Optional[HloPrintOptions] = None,
                          is_entry: Optional[bool] = None) -> str:
  options = options or _DEFAULT
  if is_entry is None:
    is_entry = comp.is_entry_computation()
  head = ("ENTRY " if is_entry else "") + _name(comp.name, options)
  if options.print_program_shape and comp.root_instruction is not None:
    params = ", ".join(f"{p.name}: {p.shape.to_string()}"
                       for p in comp.parameter_instructions)
    head += f" ({params}) -> {comp.root_instruction.shape.to_string()}"
  lines = [head + " {"]
  for instr in comp.instructions_in_stable_order():
    lines.append("  " + instruction_to_string(
        instr, options, is_root=instr is comp.root_instruction))
  tail = "}"
  if comp.execution_thread != "main":
    tail += f", execution_thread={text_util.quote(comp.execution_thread)}"
  lines.append(tail)
  return "\n".join(lines) + "\n"


def _bools(values) -> str:
  return "{" + ",".join("true" if v else "false" for v in values) + "}"


def program_shape_to_layout_string(ps) -> str:
  params = ", ".join(p.to_string(print_layout=True) for p in ps.parameters)
  return f"{{({params})->{ps.result.to_string(print_layout=True)}}}"


def module_header(module) -> str:
  parts = [f"HloModule {module.name}"]
  if module.is_scheduled:
    parts.append("is_scheduled=true")
  if module.input_output_aliases:
    parts.append("input_output_alias={ " + ", ".join(
        f"{_int_list(a.output_index)}: ({a.parameter_number}, "
        f"{_int_list(a.parameter_index)}, "
        f"{'must-alias' if a.must_alias else 'may-alias'})"
        for a in module.input_output_aliases) + " }")
  if module.buffer_donors:
    parts.append("buffer_donor={ " + ", ".join(
        f"({d.parameter_number}, {_int_list(d.parameter_index)})"
        for d in module.buffer_donors) + " }")
  config = module.config
  if config.alias_passthrough_params:
    parts.append("alias_passthrough_params=true")
  if module.entry_computation is not None or (
      config.entry_computation_layout is not None):
    parts.append("entry_computation_layout=" + program_shape_to_layout_string(
        module.entry_computation_layout()))
  if tuple(config.allow_spmd_sharding_propagation_to_parameters) != (False,):
    parts.append("allow_spmd_sharding_propagation_to_parameters=" +
                 _bools(config.allow_spmd_sharding_propagation_to_parameters))
  if tuple(config.allow_spmd_sharding_propagation_to_output) != (False,):
    parts.append("allow_spmd_sharding_propagation_to_output=" +
                 _bools(config.allow_spmd_sharding_propagation_to_output))
  if config.replica_count != 1:
    parts.append(f"replica_count={config.replica_count}")
  if config.num_partitions != 1:
    parts.append(f"num_partitions={config.num_partitions}")
  if module.frontend_attributes:
    parts.append("frontend_attributes=" +
                 frontend_attributes_to_string(module.frontend_attributes))
  if module.origin_recovery_table is not None:
    parts.append(f"origin_recovery_table={module.origin_recovery_table.text}")
  return ", ".join(parts)


def stack_frame_index_to_string(index: xla_data.StackFrameIndex) -> str:
  out = ["FileNames"]
  out += [f"{i} {text_util.quote(n)}"
          for i, n in enumerate(index.file_names, 1)]
  out += ["", "FunctionNames"]
  out += [f"{i} {text_util.quote(n)}"
          for i, n in enumerate(index.function_names, 1)]
  out += ["", "FileLocations"]
  out += [f"{i} {{file_name_id={l.file_name_id} "
          f"function_name_id={l.function_name_id} line={l.line} "
          f"end_line={l.end_line} column={l.column} "
          f"end_column={l.end_column}}}"
          for i, l in enumerate(index.file_locations, 1)]
  out += ["", "StackFrames"]
  out += [f"{i} {{file_location_id={f.file_location_id} "
          f"parent_frame_id={f.parent_frame_id}}}"
          for i, f in enumerate(index.stack_frames, 1)]
  return "\n".join(out) + "\n\n"


def module_to_string(module, options: Optional[HloPrintOptions] = None) -> str:
  options = options or _DEFAULT
  text = module_header(module) + "\n\n"
  if options.print_stack_frame_index and module.stack_frame_index is not None:
    text += stack_frame_index_to_string(module.stack_frame_index) + "\n"
  comps = [computation_to_string(c, options,
                                 is_entry=c is module.entry_computation)
           for c in module.computations_in_stable_order()]
  return text + "\n".join(comps) + "\n"
