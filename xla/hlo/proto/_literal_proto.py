"""Shapes, layouts and literals <-> their protos (ShapeProto, LiteralProto).

LiteralProto keeps array data in the literal's physical (layout) order: a
repeated numeric field for 32/64-bit and PRED types (complex values as
interleaved real, imag), little-endian bytes for 16-bit types, and one byte
per element for 8-bit and narrower types (s4/u4/s2/... are not bit-packed in
the proto, as XLA's Literal writes them from its unpacked in-memory form).
"""

from __future__ import annotations

import numpy as np

import support
from xla import primitive_util
from xla.layout import DimLevel
from xla.layout import Layout
from xla.layout import SplitConfig
from xla.literal import Literal
from xla.shape import ProgramShape
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P

# Element type -> (LiteralProto field, storage): "rep" a repeated numeric
# field, "bytes" raw little-endian bytes.
_FIELDS = {
    P.PRED: ("preds", "rep"), P.S32: ("s32s", "rep"), P.S64: ("s64s", "rep"),
    P.U32: ("u32s", "rep"), P.U64: ("u64s", "rep"), P.F32: ("f32s", "rep"),
    P.F64: ("f64s", "rep"), P.C64: ("c64s", "rep"), P.C128: ("c128s", "rep"),
    P.S1: ("s1s", "bytes"), P.S2: ("s2s", "bytes"), P.S4: ("s4s", "bytes"),
    P.S8: ("s8s", "bytes"), P.U1: ("u1s", "bytes"), P.U2: ("u2s", "bytes"),
    P.U4: ("u4s", "bytes"), P.U8: ("u8s", "bytes"),
    P.F16: ("f16s", "bytes"), P.BF16: ("bf16s", "bytes"),
    P.U16: ("u16s", "bytes"), P.S16: ("s16s", "bytes"),
    P.F4E2M1FN: ("f4e2m1fns", "bytes"), P.F8E3M4: ("f8e3m4s", "bytes"),
    P.F8E4M3B11FNUZ: ("f8e4m3b11fnuzs", "bytes"),
    P.F8E4M3FN: ("f8e4m3fns", "bytes"), P.F8E4M3FNUZ: ("f8e4m3fnuzs", "bytes"),
    P.F8E4M3: ("f8e4m3s", "bytes"), P.F8E5M2FNUZ: ("f8e5m2fnuzs", "bytes"),
    P.F8E5M2: ("f8e5m2s", "bytes"), P.F8E8M0FNU: ("f8e8m0fnus", "bytes"),
}
_DIM_LEVEL = {0: "D", 1: "C", 2: "S", 3: "H"}
_DIM_LEVEL_NUM = {v: k for k, v in _DIM_LEVEL.items()}


def _ptype(value: int, what: str) -> P:
  try:
    return P(value)
  except ValueError:
    raise support.InvalidArgumentError(
        f"unknown primitive type {value} in {what}") from None


# -- layouts and shapes --------------------------------------------------------


def layout_from_proto(lp) -> Layout:
  n = len(lp.dim_level_types)
  levels = tuple(
      DimLevel(_DIM_LEVEL.get(lp.dim_level_types[i], "D"),
               lp.dim_unique[i] if len(lp.dim_unique) == n else True,
               lp.dim_ordered[i] if len(lp.dim_ordered) == n else True)
      for i in range(n))
  return Layout(
      minor_to_major=tuple(lp.minor_to_major),
      dim_level_types=levels,
      tiles=tuple(tuple(t.dimensions) for t in lp.tiles),
      tail_padding_alignment_in_elements=(
          lp.tail_padding_alignment_in_elements or 1),
      index_primitive_type=_ptype(lp.index_primitive_type, "layout"),
      pointer_primitive_type=_ptype(lp.pointer_primitive_type, "layout"),
      element_size_in_bits=lp.element_size_in_bits,
      memory_space=lp.memory_space,
      split_configs=tuple(SplitConfig(s.dimension, tuple(s.split_indices))
                          for s in lp.split_configs),
      physical_shape=(shape_from_proto(lp.physical_shape)
                      if lp.HasField("physical_shape") else None),
      dynamic_shape_metadata_prefix_bytes=(
          lp.dynamic_shape_metadata_prefix_bytes))


def layout_to_proto(layout: Layout, lp) -> None:
  lp.minor_to_major.extend(layout.minor_to_major)
  for d in layout.dim_level_types:
    lp.dim_level_types.append(_DIM_LEVEL_NUM[d.kind])
  if any(not d.unique for d in layout.dim_level_types):
    lp.dim_unique.extend(d.unique for d in layout.dim_level_types)
  if any(not d.ordered for d in layout.dim_level_types):
    lp.dim_ordered.extend(d.ordered for d in layout.dim_level_types)
  for t in layout.tiles:
    lp.tiles.add().dimensions.extend(t)
  lp.tail_padding_alignment_in_elements = (
      layout.tail_padding_alignment_in_elements)
  lp.index_primitive_type = int(layout.index_primitive_type)
  lp.pointer_primitive_type = int(layout.pointer_primitive_type)
  lp.element_size_in_bits = layout.element_size_in_bits
  lp.memory_space = layout.memory_space
  for s in layout.split_configs:
    sp = lp.split_configs.add(dimension=s.dimension)
    sp.split_indices.extend(s.split_indices)
  if layout.physical_shape is not None:
    shape_to_proto(layout.physical_shape, lp.physical_shape)
  lp.dynamic_shape_metadata_prefix_bytes = (
      layout.dynamic_shape_metadata_prefix_bytes)


def shape_from_proto(sp) -> Shape:
  et = _ptype(sp.element_type, "shape")
  if et in (P.TUPLE, P.BUFFER):
    return Shape(et, tuple_shapes=tuple(shape_from_proto(s)
                                        for s in sp.tuple_shapes))
  layout = None
  if sp.HasField("layout") and et not in (P.TOKEN, P.OPAQUE_TYPE):
    layout = layout_from_proto(sp.layout)
  return Shape(et, tuple(sp.dimensions), tuple(sp.is_dynamic_dimension), (),
               layout)


def shape_to_proto(shape: Shape, sp) -> None:
  sp.element_type = int(shape.element_type)
  sp.dimensions.extend(shape.dimensions)
  if shape.is_array():
    sp.is_dynamic_dimension.extend(shape.dynamic_dimensions)
  for s in shape.tuple_shapes:
    shape_to_proto(s, sp.tuple_shapes.add())
  if shape.layout is not None:
    layout_to_proto(shape.layout, sp.layout)


def program_shape_from_proto(pp) -> ProgramShape:
  return ProgramShape(tuple(shape_from_proto(s) for s in pp.parameters),
                      shape_from_proto(pp.result))


def program_shape_to_proto(ps: ProgramShape, pp, names=()) -> None:
  for s in ps.parameters:
    shape_to_proto(s, pp.parameters.add())
  shape_to_proto(ps.result, pp.result)
  pp.parameter_names.extend(names)


# -- literals ------------------------------------------------------------------


def _physical_axes(shape: Shape) -> tuple[int, ...]:
  """Logical axes from most major to most minor."""
  if shape.layout is None or not shape.layout.minor_to_major:
    return tuple(range(len(shape.dimensions)))
  return tuple(reversed(shape.layout.minor_to_major))


def literal_from_proto(lp) -> Literal:
  if not lp.HasField("shape"):
    raise support.InvalidArgumentError("LiteralProto has no shape")
  shape = shape_from_proto(lp.shape)
  if shape.is_tuple():
    if len(lp.tuple_literals) != len(shape.tuple_shapes):
      raise support.InvalidArgumentError(
          f"tuple LiteralProto of shape {shape.to_string()} has "
          f"{len(lp.tuple_literals)} elements")
    return Literal(shape, elements=[literal_from_proto(e)
                                    for e in lp.tuple_literals])
  if shape.is_token():
    return Literal(shape)
  if not shape.is_array():
    raise support.UnimplementedError(
        f"Unimplemented: LiteralProto of shape {shape.to_string()}")
  if lp.sparse_indices:
    raise support.UnimplementedError(
        "Unimplemented: LiteralProto field sparse_indices")
  et = shape.element_type
  if et not in _FIELDS:
    raise support.UnimplementedError(
        f"Unimplemented: LiteralProto of element type {et.name}")
  field, storage = _FIELDS[et]
  dtype = primitive_util.numpy_dtype(et)
  count = int(np.prod(shape.dimensions, dtype=np.int64))
  if storage == "rep":
    values = getattr(lp, field)
    if primitive_util.is_complex(et):
      real = np.asarray(values, dtype.type(0).real.dtype)
      if real.size != 2 * count:
        raise support.InvalidArgumentError(
            f"LiteralProto {field} has {real.size} values, expected "
            f"{2 * count} for {shape.to_string()}")
      flat = (real[0::2] + 1j * real[1::2]).astype(dtype)
    else:
      flat = np.asarray(values, dtype)
  else:
    raw = getattr(lp, field)
    width = primitive_util.byte_width(et)
    if len(raw) != count * width:
      raise support.InvalidArgumentError(
          f"LiteralProto {field} has {len(raw)} bytes, expected "
          f"{count * width} for {shape.to_string()}")
    bits = primitive_util.bit_width(et)
    if bits < 8:
      codes = np.frombuffer(raw, np.uint8) & ((1 << bits) - 1)
      if primitive_util.is_floating_point(et):
        flat = codes.astype(np.uint8).view(dtype)
      else:
        values = codes.astype(np.int16)
        if primitive_util.is_signed_integral(et):
          values = np.where(values >= 1 << (bits - 1), values - (1 << bits),
                            values)
        flat = values.astype(dtype)
    else:
      flat = np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype)
  if flat.size != count:
    raise support.InvalidArgumentError(
        f"LiteralProto {field} has {flat.size} values, expected {count} "
        f"for {shape.to_string()}")
  axes = _physical_axes(shape)
  physical = flat.reshape([shape.dimensions[a] for a in axes])
  array = np.array(physical.transpose(np.argsort(axes)), order="C")
  return Literal(shape, array)


def with_default_layouts(sp) -> None:
  """Gives every array of a ShapeProto without a layout the default one
  (major-to-minor): XLA's literal reader requires layouts, and the data
  below is written in that order when the shape has none."""
  if sp.tuple_shapes:
    for t in sp.tuple_shapes:
      with_default_layouts(t)
  elif not sp.HasField("layout") and sp.element_type not in (
      int(P.TUPLE), int(P.TOKEN)):
    sp.layout.minor_to_major.extend(reversed(range(len(sp.dimensions))))


def literal_to_proto(lit: Literal, lp) -> None:
  shape = lit.shape
  shape_to_proto(shape, lp.shape)
  with_default_layouts(lp.shape)
  if shape.is_tuple():
    for e in lit.elements:
      literal_to_proto(e, lp.tuple_literals.add())
    return
  if shape.is_token():
    return
  et = shape.element_type
  if et not in _FIELDS:
    raise support.UnimplementedError(
        f"Unimplemented: LiteralProto of element type {et.name}")
  field, storage = _FIELDS[et]
  flat = np.ascontiguousarray(
      lit.array.transpose(_physical_axes(shape))).reshape(-1)
  if storage == "rep":
    if primitive_util.is_complex(et):
      inter = np.empty(2 * flat.size, flat.real.dtype)
      inter[0::2], inter[1::2] = flat.real, flat.imag
      getattr(lp, field).extend(inter.tolist())
    else:
      getattr(lp, field).extend(flat.tolist())
  elif primitive_util.bit_width(et) < 8:
    if primitive_util.is_floating_point(et):
      raw = flat.view(np.uint8)
    elif primitive_util.is_signed_integral(et):
      raw = flat.astype(np.int8)
    else:
      raw = flat.astype(np.uint8)
    setattr(lp, field, raw.tobytes())
  else:
    setattr(lp, field, flat.astype(flat.dtype.newbyteorder("<")).tobytes())
