"""Primitive encodings of the MLIR bytecode format.

Facts from MLIR's `mlir/docs/BytecodeFormat.md`: a varint stores its count of
extra bytes as the trailing zero bits of the first byte (a first byte of 0
means 8 raw little-endian bytes follow); signed varints are zigzag encoded; a
section is an id byte (high bit: an alignment follows), a varint length, an
optional alignment varint plus 0xCB padding, then the data.

`Reader` never lets an `IndexError` or `struct.error` escape: every malformed
input becomes a `support.DataLossError` naming the absolute file offset.
This is hand-written because no maintained Python package reads MLIR bytecode.
"""

from __future__ import annotations

import enum

import support

MAGIC = b"ML\xefR"
ALIGNMENT_BYTE = 0xCB
MAX_VERSION = 6  # Newest bytecode version this package reads and writes.

# Bytecode versions that changed the encoding (Encoding.h's BytecodeVersion).
V_DIALECT_VERSIONING = 1
V_LAZY_LOADING = 2
V_USE_LIST_ORDERING = 3
V_ELIDE_UNKNOWN_BLOCK_ARG_LOCATION = 4
V_NATIVE_PROPERTIES = 5


class Section(enum.IntEnum):
  STRING = 0
  DIALECT = 1
  ATTR_TYPE = 2
  ATTR_TYPE_OFFSET = 3
  IR = 4
  RESOURCE = 5
  RESOURCE_OFFSET = 6
  DIALECT_VERSIONS = 7
  PROPERTIES = 8


_MAX_SECTION = max(Section)

# Operation encoding mask bits.
HAS_ATTRS = 0x01
HAS_RESULTS = 0x02
HAS_OPERANDS = 0x04
HAS_SUCCESSORS = 0x08
HAS_INLINE_REGIONS = 0x10
HAS_USE_LIST_ORDERS = 0x20
HAS_PROPERTIES = 0x40
KNOWN_MASK_BITS = 0x7F

_U64 = (1 << 64) - 1


def zigzag_encode(value: int) -> int:
  """Maps an int64 to the uint64 that a signed varint stores."""
  value &= _U64
  signed = value - (1 << 64) if value >> 63 else value
  return ((value << 1) & _U64) ^ ((signed >> 63) & _U64)


def zigzag_decode(value: int) -> int:
  return (value >> 1) ^ -(value & 1)


class Reader:
  """A bounds-checked cursor over `data[pos:end]`; offsets are absolute."""

  def __init__(self, data: bytes, pos: int = 0, end: int | None = None):
    self.data = data
    self.pos = pos
    self.end = len(data) if end is None else end

  def error(self, message: str, offset: int | None = None) -> support.DataLossError:
    offset = self.pos if offset is None else offset
    return support.DataLossError(
        f"malformed MLIR bytecode at offset {offset}: {message}")

  def at_end(self) -> bool:
    return self.pos >= self.end

  def remaining(self) -> int:
    return self.end - self.pos

  def byte(self, what: str = "byte") -> int:
    pos = self.pos
    if pos >= self.end:
      raise self.error(f"unexpected end of data reading {what}")
    self.pos = pos + 1
    return self.data[pos]

  def bytes(self, n: int, what: str = "bytes") -> bytes:
    if n < 0 or n > self.end - self.pos:
      raise self.error(f"{what} of {n} bytes runs past the end "
                       f"({self.end - self.pos} left)")
    value = bytes(self.data[self.pos:self.pos + n])
    self.pos += n
    return value

  def varint(self, what: str = "varint") -> int:
    start = pos = self.pos
    if pos >= self.end:
      raise self.error(f"unexpected end of data reading {what}")
    first = self.data[pos]
    self.pos = pos + 1
    if first & 1:  # one byte: most varints (indices, small counts)
      return first >> 1
    if first == 0:
      return int.from_bytes(self.bytes(8, what), "little")
    extra = (first & -first).bit_length() - 1  # Trailing zero bits.
    rest = self.bytes(extra, what) if self.pos + extra <= self.end else None
    if rest is None:
      raise self.error(f"truncated {what}", start)
    value = int.from_bytes(bytes([first]) + rest, "little")
    return value >> (extra + 1)

  def svarint(self, what: str = "signed varint") -> int:
    return zigzag_decode(self.varint(what))

  def varint_with_flag(self, what: str = "varint") -> tuple[int, bool]:
    pos = self.pos
    if pos < self.end:
      first = self.data[pos]
      if first & 1:
        self.pos = pos + 1
        return first >> 2, bool(first & 2)
    value = self.varint(what)
    return value >> 1, bool(value & 1)

  def index(self, limit: int, what: str) -> int:
    """A varint that must be `< limit` (an index into a table)."""
    start = self.pos
    value = self.varint(what)
    if value >= limit:
      raise self.error(f"{what} {value} out of range (size {limit})", start)
    return value

  def count(self, what: str, min_bytes_each: int = 1) -> int:
    """A varint element count, sanity-checked against the bytes left."""
    start = self.pos
    value = self.varint(what)
    if value * min_bytes_each > self.end - self.pos:
      raise self.error(f"{what} {value} exceeds the remaining data", start)
    return value

  def nul_string(self, what: str = "string") -> bytes:
    stop = self.data.find(b"\0", self.pos, self.end)
    if stop < 0:
      raise self.error(f"unterminated {what}")
    value = bytes(self.data[self.pos:stop])
    self.pos = stop + 1
    return value

  def align(self, alignment: int) -> None:
    if alignment < 1 or alignment & (alignment - 1):
      raise self.error(f"alignment {alignment} is not a power of two")
    while self.pos % alignment:
      if self.byte("alignment padding") != ALIGNMENT_BYTE:
        raise self.error("alignment padding byte is not 0xCB", self.pos - 1)

  def sub(self, n: int, what: str) -> "Reader":
    """A reader over the next `n` bytes, which this reader then skips."""
    if n < 0 or n > self.end - self.pos:
      raise self.error(f"{what} of {n} bytes runs past the end "
                       f"({self.end - self.pos} left)")
    sub = Reader(self.data, self.pos, self.pos + n)
    self.pos += n
    return sub

  def section(self) -> tuple[int, "Reader"]:
    """Reads a section header and returns (id, reader over its data)."""
    start = self.pos
    code = self.byte("section id")
    section_id, aligned = code & 0x7F, bool(code & 0x80)
    length = self.varint("section length")
    if aligned:
      alignment = self.varint("section alignment")
      self.align(alignment)
    if section_id > _MAX_SECTION:
      raise self.error(f"unknown section id {section_id}", start)
    if length > self.end - self.pos:  # (sub's check, its message built here)
      return section_id, self.sub(length, f"section {section_id}")
    sub = Reader(self.data, self.pos, self.pos + length)
    self.pos += length
    return section_id, sub


class Emitter:
  """Accumulates bytes; mirrors how upstream nests section emitters."""

  def __init__(self):
    self.buf = bytearray()
    self.required_alignment = 1

  def __len__(self) -> int:
    return len(self.buf)

  def byte(self, value: int) -> None:
    self.buf.append(value & 0xFF)

  def raw(self, data: bytes) -> None:
    self.buf += data

  def varint(self, value: int) -> None:
    if 0 <= value < 0x80:  # one byte: most varints
      self.buf.append((value << 1) | 1)
      return
    if value < 0 or value > _U64:
      raise support.InvalidArgumentError(f"varint {value} out of range")
    for num_bytes in range(2, 9):
      if value >> (7 * num_bytes) == 0:
        encoded = ((value << 1) | 1) << (num_bytes - 1)
        self.buf += encoded.to_bytes(num_bytes, "little")
        return
    self.buf.append(0)
    self.buf += value.to_bytes(8, "little")

  def svarint(self, value: int) -> None:
    self.varint(zigzag_encode(value))

  def varint_with_flag(self, value: int, flag: bool) -> None:
    self.varint((value << 1) | (1 if flag else 0))

  def nul_string(self, value: bytes) -> None:
    self.buf += value
    self.buf.append(0)

  def align_to(self, alignment: int) -> None:
    if alignment < 2:
      return
    while len(self.buf) % alignment:
      self.buf.append(ALIGNMENT_BYTE)
    self.required_alignment = max(self.required_alignment, alignment)

  def section(self, section_id: int, body: "Emitter") -> None:
    code_offset = len(self.buf)
    self.byte(section_id)
    self.varint(len(body.buf))
    alignment = body.required_alignment
    if alignment > 1:
      if len(self.buf) & (alignment - 1):
        self.varint(alignment)
        self.align_to(alignment)
        self.buf[code_offset] |= 0x80
      else:
        self.required_alignment = max(self.required_alignment, alignment)
    self.buf += body.buf
