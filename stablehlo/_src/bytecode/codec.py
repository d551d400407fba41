"""Table-driven attribute/type encodings of dialects (`DialectCodec`).

A dialect's bytecode interface writes each attribute or type as a leading
varint kind code followed by fields. A codec lists, per kind code, the kind's
name and its field encodings; one table then serves reading, writing and the
writer's numbering walk (which visits nested attributes and types in the order
they are written, as upstream's IRNumbering does).

Field encodings (`kind` in a `(name, kind)` field spec):
  varint, svarint, byte       integers
  attr, type                  a reference (varint index)
  opt_attr                    0, or (index << 1 | 1); value None when absent
  opt_varint                  0, or (value << 1 | 1); value None when absent
  flag_attr                   varint 0, or varint 1 then a reference
  string                      a string-section reference
  blob                        varint size + bytes
  varints, svarints, attrs, types
                              varint count + elements
  attr_pairs                  varint count + (attr, attr) pairs
  resource                    a dialect resource handle reference
  apint:<fn>                  an APInt whose width `fn(fields)` gives
  apints64                    varint count + 64-bit APInts (APFloat double)
  strings:<fn>                `fn(fields)` strings
where `<fn>` names a function the codec registers in `functions`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import support
from stablehlo._src.bytecode import encoding
from stablehlo._src.bytecode import tree

_REGISTRY: dict = {}


@dataclasses.dataclass
class DialectCodec:
  """The bytecode encodings of one dialect's attributes and types."""
  dialect: str
  attrs: dict  # code -> (kind name, ((field name, field kind), ...))
  types: dict
  functions: dict = dataclasses.field(default_factory=dict)
  # op name -> property kinds; "*" maps every op of the dialect; a value of
  # "attrs" means: required attribute references up to the end of the blob.
  properties: dict = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    self.attr_codes = {name: code for code, (name, _) in self.attrs.items()}
    self.type_codes = {name: code for code, (name, _) in self.types.items()}
    self._field_names: dict = {}  # (Attr or Type, kind) -> field names
    self._readers: dict = {}  # (is attr, code) -> (kind name, read function)

  def entry_reader(self, is_attr: bool, code: int):
    """(kind name, `fields_reader` of its spec) of the attribute (or type)
    kind `code`, or None when the dialect has no such kind."""
    key = (is_attr, code)
    hit = self._readers.get(key)
    if hit is None:
      found = (self.attrs if is_attr else self.types).get(code)
      if found is None:
        return None
      kind, spec = found
      hit = self._readers[key] = (kind, fields_reader(self, spec))
    return hit

  def field_names(self, entry) -> tuple:
    key = (entry.__class__, entry.kind)
    names = self._field_names.get(key)
    if names is None:
      table, codes = ((self.attrs, self.attr_codes)
                      if isinstance(entry, tree.Attr)
                      else (self.types, self.type_codes))
      names = self._field_names[key] = tuple(
          n for n, _ in table[codes[entry.kind]][1])
    return names

  def get(self, entry, name: str):
    """The field `name` of `entry` (an `Attr`/`Type` of this dialect)."""
    return entry.fields[self.field_names(entry).index(name)]

  def property_kinds(self, op_name: str):
    return self.properties.get(op_name, self.properties.get("*"))


_GENERATION = [0]  # counts registrations


def register(codec: DialectCodec) -> DialectCodec:
  _REGISTRY[codec.dialect] = codec
  _GENERATION[0] += 1
  return codec


def generation() -> int:
  """Changes whenever a codec is registered (caches keyed by entry kind
  that hold a codec's functions stay valid while it does not)."""
  return _GENERATION[0]


def lookup(dialect: str):
  return _REGISTRY.get(dialect)


def registered() -> dict:
  return dict(_REGISTRY)


class DecodeContext:
  """What field decoding needs from the reader (index resolution)."""

  def attr(self, index: int, r: encoding.Reader):
    raise NotImplementedError

  def type(self, index: int, r: encoding.Reader):
    raise NotImplementedError

  def string(self, index: int, r: encoding.Reader) -> str:
    raise NotImplementedError

  def resource(self, index: int, r: encoding.Reader):
    raise NotImplementedError


class EncodeContext:
  """What field encoding needs from the writer (index assignment)."""

  def attr_index(self, attr) -> int:
    raise NotImplementedError

  def type_index(self, type_) -> int:
    raise NotImplementedError

  def string_index(self, value: str) -> int:
    raise NotImplementedError

  def resource_index(self, handle) -> int:
    raise NotImplementedError


def read_apint(r: encoding.Reader, width: int) -> int:
  """Reads an APInt of a known width; returns its unsigned bit pattern."""
  if width <= 8:
    return r.byte("APInt")
  mask = (1 << width) - 1
  if width <= 64:
    return r.svarint("APInt") & mask
  words = r.count("APInt word count")
  value = 0
  for i in range(words):
    value |= (r.svarint("APInt word") & ((1 << 64) - 1)) << (64 * i)
  return value & mask


def write_apint(e: encoding.Emitter, width: int, value: int) -> None:
  value &= (1 << width) - 1
  if width <= 8:
    e.byte(value)
  elif width <= 64:
    e.svarint(value)
  else:
    words = max(1, (value.bit_length() + 63) // 64)
    e.varint(words)
    for i in range(words):
      e.svarint((value >> (64 * i)) & ((1 << 64) - 1))


def _fn(codec: DialectCodec, kind: str) -> Callable:
  name = kind.split(":", 1)[1]
  return codec.functions[name]


def read_fields(codec: DialectCodec, spec, r: encoding.Reader,
                ctx: DecodeContext) -> tuple:
  values = []
  append = values.append
  for _, kind in spec:
    # References and plain varints are most fields: read them here.
    if kind == "attr":
      append(ctx.attr(r.varint("attribute reference"), r))
    elif kind == "type":
      append(ctx.type(r.varint("type reference"), r))
    elif kind == "varint":
      append(r.varint())
    else:
      append(_read_field(codec, kind, r, ctx, values))
  return tuple(values)


def fields_reader(codec: DialectCodec, spec):
  """A function `(r, ctx) -> fields` doing what `read_fields(codec, spec,
  r, ctx)` does, made once from source text: one-byte varints and
  references are read in place (a call per field and per varint less);
  other field kinds go through _read_field."""
  lines = ["def read_entry(r, ctx):", "  data = r.data"]
  names = []
  for i, (_, kind) in enumerate(spec):
    v = f"v{i}"
    if kind in ("attr", "type", "varint"):
      what = {"attr": "attribute reference", "type": "type reference",
              "varint": "varint"}[kind]
      lines += _inline_varint(what, "  ")
      if kind == "varint":
        lines.append(f"  {v} = x")
      else:
        lines.append(f"  {v} = ctx.{kind}(x, r)")
    elif kind in ("attrs", "types", "svarints"):
      what = {"attrs": "attribute reference", "types": "type reference",
              "svarints": "signed varint"}[kind]
      lines += ["  items = []",
                "  for _ in range(r.count('list size')):",
                *_inline_varint(what, "    ")]
      if kind == "svarints":
        lines.append("    items.append((x >> 1) ^ -(x & 1))")
      else:
        lines.append(f"    items.append(ctx.{kind[:-1]}(x, r))")
      lines.append(f"  {v} = tuple(items)")
    else:
      lines.append(f"  {v} = _read_field(codec, {kind!r}, r, ctx, "
                   f"[{', '.join(names)}])")
    names.append(v)
  lines.append(f"  return ({''.join(n + ', ' for n in names)})")
  scope = {"codec": codec, "_read_field": _read_field}
  exec("\n".join(lines), scope)  # pylint: disable=exec-used
  return scope["read_entry"]


def _inline_varint(what: str, indent: str) -> list[str]:
  """Generated lines that set `x` to the varint at `r.pos`: a one-byte
  varint read in place, any other through `r.varint`."""
  return [indent + line for line in (
      "p = r.pos",
      "if p < r.end and data[p] & 1:",
      "  r.pos = p + 1",
      "  x = data[p] >> 1",
      "else:",
      f"  x = r.varint({what!r})")]


def _read_field(codec, kind, r, ctx, values):
  if kind == "varint":
    return r.varint()
  if kind == "svarint":
    return r.svarint()
  if kind == "byte":
    return r.byte()
  if kind == "attr":
    return ctx.attr(r.varint("attribute reference"), r)
  if kind == "type":
    return ctx.type(r.varint("type reference"), r)
  if kind == "opt_attr":
    index, present = r.varint_with_flag("optional attribute")
    if not present:
      if index:
        raise r.error("absent optional attribute with a nonzero index")
      return None
    return ctx.attr(index, r)
  if kind == "opt_varint":
    value, present = r.varint_with_flag("optional varint")
    if not present:
      if value:
        raise r.error("absent optional varint with a nonzero value")
      return None
    return value
  if kind == "flag_attr":
    flag = r.varint("attribute flag")
    if flag > 1:
      raise r.error(f"attribute presence flag {flag} is not 0 or 1")
    return ctx.attr(r.varint("attribute reference"), r) if flag else None
  if kind == "string":
    return ctx.string(r.varint("string reference"), r)
  if kind == "blob":
    return r.bytes(r.varint("blob size"), "blob")
  if kind == "resource":
    return ctx.resource(r.varint("resource reference"), r)
  if kind == "varints":
    return tuple(r.varint() for _ in range(r.count("list size")))
  if kind == "svarints":
    return tuple(r.svarint() for _ in range(r.count("list size")))
  if kind == "attrs":
    return tuple(ctx.attr(r.varint("attribute reference"), r)
                 for _ in range(r.count("list size")))
  if kind == "types":
    return tuple(ctx.type(r.varint("type reference"), r)
                 for _ in range(r.count("list size")))
  if kind == "attr_pairs":
    n = r.count("list size", 2)
    return tuple((ctx.attr(r.varint("attribute reference"), r),
                  ctx.attr(r.varint("attribute reference"), r))
                 for _ in range(n))
  if kind == "apints64":
    return tuple(read_apint(r, 64) for _ in range(r.count("list size")))
  if kind.startswith("apint:"):
    return read_apint(r, _checked_width(_fn(codec, kind)(values), r))
  if kind.startswith("strings:"):
    n = _fn(codec, kind)(values)
    if n > r.remaining():
      raise r.error(f"{n} strings exceed the remaining data")
    return tuple(ctx.string(r.varint("string reference"), r) for _ in range(n))
  raise support.InternalError(f"unknown field kind {kind!r}")


def _checked_width(width, r):
  if width is None or width <= 0:
    raise r.error("APInt of an unsupported type")
  return width


def write_fields(codec: DialectCodec, spec, values: tuple,
                 e: encoding.Emitter, ctx: EncodeContext) -> None:
  if len(spec) != len(values):
    raise support.InvalidArgumentError(
        f"{codec.dialect}: expected {len(spec)} fields, got {len(values)}")
  done = []
  for (name, kind), value in zip(spec, values):
    # References and plain varints are most fields: write them here.
    if kind == "attr":
      e.varint(ctx.attr_index(value))
    elif kind == "type":
      e.varint(ctx.type_index(value))
    elif kind == "varint":
      e.varint(value)
    else:
      write_field(codec, kind, value, e, ctx, done)
    done.append(value)


def write_field(codec, kind, value, e, ctx, done):
  if kind == "varint":
    e.varint(value)
  elif kind == "svarint":
    e.svarint(value)
  elif kind == "byte":
    e.byte(value)
  elif kind == "attr":
    e.varint(ctx.attr_index(value))
  elif kind == "type":
    e.varint(ctx.type_index(value))
  elif kind == "opt_attr":
    if value is None:
      e.varint(0)
    else:
      e.varint_with_flag(ctx.attr_index(value), True)
  elif kind == "opt_varint":
    if value is None:
      e.varint(0)
    else:
      e.varint_with_flag(value, True)
  elif kind == "flag_attr":
    if value is None:
      e.varint(0)
    else:
      e.varint(1)
      e.varint(ctx.attr_index(value))
  elif kind == "string":
    e.varint(ctx.string_index(value))
  elif kind == "blob":
    e.varint(len(value))
    e.raw(value)
  elif kind == "resource":
    e.varint(ctx.resource_index(value))
  elif kind == "varints":
    e.varint(len(value))
    for v in value:
      e.varint(v)
  elif kind == "svarints":
    e.varint(len(value))
    for v in value:
      e.svarint(v)
  elif kind == "attrs":
    e.varint(len(value))
    for v in value:
      e.varint(ctx.attr_index(v))
  elif kind == "types":
    e.varint(len(value))
    for v in value:
      e.varint(ctx.type_index(v))
  elif kind == "attr_pairs":
    e.varint(len(value))
    for a, b in value:
      e.varint(ctx.attr_index(a))
      e.varint(ctx.attr_index(b))
  elif kind == "apints64":
    e.varint(len(value))
    for v in value:
      write_apint(e, 64, v)
  elif kind.startswith("apint:"):
    width = _fn(codec, kind)(done)
    if not width:
      raise support.InvalidArgumentError("APInt of an unsupported type")
    write_apint(e, width, value)
  elif kind.startswith("strings:"):
    for v in value:
      e.varint(ctx.string_index(v))
  else:
    raise support.InternalError(f"unknown field kind {kind!r}")


_REF_KINDS = frozenset(("attr", "opt_attr", "flag_attr", "type", "resource",
                        "attrs", "types", "attr_pairs"))
_REF_FIELDS: dict = {}


def ref_fields(spec) -> tuple:
  """((field index, kind), ...) of the fields of `spec` that refer to other
  entries (what nested_refs walks), computed once per spec."""
  hit = _REF_FIELDS.get(spec)
  if hit is None:
    hit = _REF_FIELDS[spec] = tuple(
        (i, kind) for i, (_, kind) in enumerate(spec) if kind in _REF_KINDS)
  return hit


def nested_refs(spec, values: tuple):
  """Yields ("attr"|"type"|"resource", ref) in the order they are written."""
  for (_, kind), value in zip(spec, values):
    if kind in ("attr", "opt_attr", "flag_attr"):
      if value is not None:
        yield "attr", value
    elif kind == "type":
      yield "type", value
    elif kind == "resource":
      yield "resource", value
    elif kind == "attrs":
      for v in value:
        yield "attr", v
    elif kind == "types":
      for v in value:
        yield "type", v
    elif kind == "attr_pairs":
      for a, b in value:
        yield "attr", a
        yield "attr", b


_SPECS: dict = {}


def spec_of(entry):
  """(codec, code, field spec) of a decoded `Attr`/`Type`, or None."""
  key = (entry.__class__, entry.dialect, entry.kind)
  spec = _SPECS.get(key)
  if spec is None:
    spec = _spec_of(entry)
    if spec is not None and _REGISTRY.get(entry.dialect) is spec[0]:
      _SPECS[key] = spec
  elif _REGISTRY.get(entry.dialect) is not spec[0]:  # re-registered codec
    _SPECS.clear()
    return _spec_of(entry)
  return spec


def _spec_of(entry):
  codec = lookup(entry.dialect)
  if codec is None:
    return None
  if isinstance(entry, tree.Attr):
    code = codec.attr_codes.get(entry.kind)
    table = codec.attrs
  else:
    code = codec.type_codes.get(entry.kind)
    table = codec.types
  if code is None:
    return None
  return codec, code, table[code][1]
