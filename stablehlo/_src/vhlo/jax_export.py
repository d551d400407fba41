"""Reads the blob of `jax.export.Exported.serialize()`.

    exp = read_jax_exported(blob)
    exp.function_name, exp.platforms, exp.in_avals, exp.nr_devices
    module = exp.module()  # the StableHLO module (our deserializer)

The blob is a FlatBuffer whose root table is jax's `Exported` (schema
`jax/_src/export/serialization.fbs`). The schema declares no file
identifier, so a blob is recognised by its structure: every offset the reader
follows is bounds-checked, and any inconsistency raises
`support.InvalidArgumentError` naming the field. Only the fields listed in
`JaxExported` are decoded; shardings, pytrees and effects are skipped. This
module decodes the FlatBuffer by hand and needs no third-party package.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Optional

import support
from stablehlo._src.vhlo import portable

# Field slots of the `Exported` table (declaration order in the schema).
_F_SERIALIZATION_VERSION = 0
_F_FUNCTION_NAME = 1
_F_IN_AVALS = 3
_F_OUT_AVALS = 5
_F_NR_DEVICES_SHORT = 6
_F_PLATFORMS = 9
_F_ORDERED_EFFECTS = 10
_F_UNORDERED_EFFECTS = 11
_F_MLIR_MODULE = 13
_F_CALLING_CONVENTION = 14
_F_KEPT_VAR_IDX = 15
_F_USES_GLOBAL_CONSTANTS = 16
_F_VJP = 17
_F_NR_DEVICES = 18
_F_UNIQUE_AVALS = 19
_F_IN_AVALS_IDXS = 22
_F_OUT_AVALS_IDXS = 23

# Field slots of `AbstractValue`, `Effect`.
_AV_KIND, _AV_SHAPE, _AV_DTYPE, _AV_MEMORY_SPACE = 0, 1, 2, 3
_EFFECT_TYPE_NAME = 0

# The schema's `DType` enum -> numpy / ml_dtypes spelling.
DTYPES = {
    0: "bool", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "uint8",
    6: "uint16", 7: "uint32", 8: "uint64", 9: "float16", 10: "float32",
    11: "float64", 12: "complex64", 13: "complex128", 14: "bfloat16",
    15: "int4", 16: "uint4", 17: "float8_e4m3b11fnuz", 18: "float8_e4m3fn",
    19: "float8_e4m3fnuz", 20: "float8_e5m2", 21: "float8_e5m2fnuz",
    22: "float0", 23: "float8_e4m3", 24: "float8_e3m4",
    25: "float8_e8m0fnu", 26: "float4_e2m1fn", 27: "key<fry>",
    28: "key<rbg>", 29: "key<unsafe_rbg>",
}

_MEMORY_SPACES = {0: None, 1: "device", 2: "host", 3: "any"}

# Nested `vjp` tables are followed at most this deep.
_MAX_VJP_DEPTH = 16


@dataclasses.dataclass(frozen=True)
class Aval:
  """One input or output: `shape` entries are ints, or strings for
  symbolic (shape-polymorphic) dimensions; `dtype` a numpy dtype name."""
  shape: tuple
  dtype: str
  memory_space: Optional[str] = None


@dataclasses.dataclass
class JaxExported:
  """The decoded fields of a `jax.export` blob."""
  serialization_version: int
  function_name: str
  in_avals: tuple
  out_avals: tuple
  platforms: tuple
  nr_devices: int
  mlir_module_serialized: bytes
  calling_convention_version: int
  module_kept_var_idx: tuple
  uses_global_constants: bool
  ordered_effects: tuple
  unordered_effects: tuple
  vjp: Optional["JaxExported"] = None

  def module(self):
    """The StableHLO module, read by `deserialize_portable_artifact`."""
    return portable.deserialize_portable_artifact(self.mlir_module_serialized)


class _Buffer:
  """Bounds-checked little-endian access to a FlatBuffer."""

  def __init__(self, data: bytes):
    self.data = data

  def error(self, what: str) -> support.InvalidArgumentError:
    return support.InvalidArgumentError(
        f"not a valid jax.export blob ({len(self.data)} bytes): {what}")

  def _unpack(self, fmt: str, pos: int, what: str):
    size = struct.calcsize(fmt)
    if pos < 0 or pos + size > len(self.data):
      raise self.error(f"{what} at offset {pos} is out of bounds")
    return struct.unpack_from(fmt, self.data, pos)[0]

  def u8(self, pos, what):
    return self._unpack("<B", pos, what)

  def u16(self, pos, what):
    return self._unpack("<H", pos, what)

  def i16(self, pos, what):
    return self._unpack("<h", pos, what)

  def u32(self, pos, what):
    return self._unpack("<I", pos, what)

  def i32(self, pos, what):
    return self._unpack("<i", pos, what)

  def follow(self, pos: int, what: str) -> int:
    """The target of the uoffset stored at `pos`."""
    return pos + self.u32(pos, what)

  def vector(self, pos: int, elem_size: int, what: str) -> tuple:
    """(first element position, length) of the vector at `pos`."""
    n = self.u32(pos, f"{what} length")
    start = pos + 4
    if start + n * elem_size > len(self.data):
      raise self.error(f"{what}: {n} elements at offset {start} overrun "
                       "the buffer")
    return start, n

  def string(self, pos: int, what: str) -> str:
    start, n = self.vector(pos, 1, what)
    try:
      return self.data[start:start + n].decode("utf-8")
    except UnicodeDecodeError as e:
      raise self.error(f"{what} is not UTF-8") from e


class _Table:
  """A FlatBuffer table: scalar and offset fields by slot number."""

  def __init__(self, buf: _Buffer, pos: int, what: str):
    self.buf, self.pos, self.what = buf, pos, what
    vtable = pos - buf.i32(pos, f"{what} vtable offset")
    vsize = buf.u16(vtable, f"{what} vtable size")
    if vsize < 4 or vsize % 2:
      raise buf.error(f"{what} has a malformed vtable (size {vsize})")
    if vtable + vsize > len(buf.data):
      raise buf.error(f"{what} vtable overruns the buffer")
    self.tsize = buf.u16(vtable + 2, f"{what} table size")
    self.vtable, self.nfields = vtable, (vsize - 4) // 2

  def field(self, slot: int) -> int:
    """The position of field `slot`, or 0 when absent."""
    if slot >= self.nfields:
      return 0
    off = self.buf.u16(self.vtable + 4 + 2 * slot, f"{self.what} field")
    if off and off >= max(self.tsize, 4):
      raise self.buf.error(f"{self.what} field {slot} lies outside its table")
    return self.pos + off if off else 0

  def scalar(self, slot: int, kind: str, default=0):
    at = self.field(slot)
    if not at:
      return default
    return getattr(self.buf, kind)(at, f"{self.what} field {slot}")

  def string(self, slot: int, name: str, default=""):
    at = self.field(slot)
    if not at:
      return default
    return self.buf.string(self.buf.follow(at, name), name)

  def vector(self, slot: int, elem_size: int, name: str) -> tuple:
    at = self.field(slot)
    if not at:
      return 0, 0
    return self.buf.vector(self.buf.follow(at, name), elem_size, name)

  def bytes(self, slot: int, name: str) -> bytes:
    start, n = self.vector(slot, 1, name)
    return self.buf.data[start:start + n]

  def u16s(self, slot: int, name: str) -> tuple:
    start, n = self.vector(slot, 2, name)
    return struct.unpack_from(f"<{n}H", self.buf.data, start) if n else ()

  def u32s(self, slot: int, name: str) -> tuple:
    start, n = self.vector(slot, 4, name)
    return struct.unpack_from(f"<{n}I", self.buf.data, start) if n else ()

  def strings(self, slot: int, name: str) -> tuple:
    start, n = self.vector(slot, 4, name)
    return tuple(self.buf.string(self.buf.follow(start + 4 * i, name), name)
                 for i in range(n))

  def tables(self, slot: int, name: str) -> list:
    start, n = self.vector(slot, 4, name)
    return [_Table(self.buf, self.buf.follow(start + 4 * i, name),
                   f"{name}[{i}]") for i in range(n)]

  def table(self, slot: int, name: str) -> Optional["_Table"]:
    at = self.field(slot)
    return _Table(self.buf, self.buf.follow(at, name), name) if at else None


def _aval(t: _Table) -> Aval:
  kind = t.scalar(_AV_KIND, "u8")
  if kind != 0:
    raise support.UnimplementedError(
        f"jax.export abstract value kind {kind} (only shaped arrays are "
        "supported)")
  code = t.scalar(_AV_DTYPE, "u8")
  if code not in DTYPES:
    raise t.buf.error(f"{t.what}: unknown dtype code {code}")
  shape = tuple(int(d) if d.isdigit() else d
                for d in t.strings(_AV_SHAPE, f"{t.what}.shape"))
  space = _MEMORY_SPACES.get(t.scalar(_AV_MEMORY_SPACE, "u8"))
  return Aval(shape, DTYPES[code], space)


def _avals(exp: _Table, direct_slot: int, idx_slot: int, unique: list,
           name: str) -> tuple:
  idxs = exp.u32s(idx_slot, f"{name}_idxs")
  if idxs:
    for i in idxs:
      if i >= len(unique):
        raise exp.buf.error(f"{name}_idxs refers to unique aval {i} of "
                            f"{len(unique)}")
    return tuple(unique[i] for i in idxs)
  return tuple(_aval(t) for t in exp.tables(direct_slot, name))


def _effects(exp: _Table, slot: int, name: str) -> tuple:
  return tuple(t.string(_EFFECT_TYPE_NAME, f"{name}.type_name")
               for t in exp.tables(slot, name))


def _exported(exp: _Table, depth: int) -> JaxExported:
  unique = [_aval(t) for t in exp.tables(_F_UNIQUE_AVALS, "unique_avals")]
  nr_devices = (exp.scalar(_F_NR_DEVICES, "u32") or
                exp.scalar(_F_NR_DEVICES_SHORT, "i16"))
  vjp = exp.table(_F_VJP, "vjp")
  if vjp is not None:
    if depth >= _MAX_VJP_DEPTH:
      raise exp.buf.error(f"vjp tables nested deeper than {_MAX_VJP_DEPTH}")
    vjp = _exported(vjp, depth + 1)
  return JaxExported(
      serialization_version=exp.scalar(_F_SERIALIZATION_VERSION, "u16"),
      function_name=exp.string(_F_FUNCTION_NAME, "function_name"),
      in_avals=_avals(exp, _F_IN_AVALS, _F_IN_AVALS_IDXS, unique, "in_avals"),
      out_avals=_avals(exp, _F_OUT_AVALS, _F_OUT_AVALS_IDXS, unique,
                       "out_avals"),
      platforms=exp.strings(_F_PLATFORMS, "platforms"),
      nr_devices=nr_devices,
      mlir_module_serialized=exp.bytes(_F_MLIR_MODULE,
                                       "mlir_module_serialized"),
      calling_convention_version=exp.scalar(_F_CALLING_CONVENTION, "u16"),
      module_kept_var_idx=exp.u16s(_F_KEPT_VAR_IDX, "module_kept_var_idx"),
      uses_global_constants=bool(exp.scalar(_F_USES_GLOBAL_CONSTANTS, "u8")),
      ordered_effects=_effects(exp, _F_ORDERED_EFFECTS, "ordered_effects"),
      unordered_effects=_effects(exp, _F_UNORDERED_EFFECTS,
                                 "unordered_effects"),
      vjp=vjp)


def read_jax_exported(blob) -> JaxExported:
  """Decodes a `jax.export` serialization; raises InvalidArgumentError on a
  blob that is not one (with the offending field)."""
  if not isinstance(blob, (bytes, bytearray, memoryview)):
    raise support.InvalidArgumentError(
        f"expected bytes, got {type(blob).__name__}")
  data = bytes(blob)
  if data[:4] == b"ML\xefR":
    raise support.InvalidArgumentError(
        "this is MLIR bytecode (a portable artifact), not a jax.export "
        "blob: use deserialize_portable_artifact")
  buf = _Buffer(data)
  if len(data) < 8:
    raise buf.error("too short for a FlatBuffer")
  root = buf.follow(0, "root table offset")
  exp = _Table(buf, root, "Exported")
  if exp.nfields <= _F_MLIR_MODULE or not exp.field(_F_MLIR_MODULE):
    raise buf.error("the Exported table has no mlir_module_serialized")
  try:
    return _exported(exp, 0)
  except RecursionError as e:
    raise buf.error("tables nested too deep") from e
