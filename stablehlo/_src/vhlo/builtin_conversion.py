"""Builtin attributes and locations: our IR <-> builtin bytecode entries.

A portable artifact keeps two things in MLIR's builtin dialect rather than in
VHLO: source locations (on every op and block argument) and the attributes of
the `builtin.module` op itself (e.g. `mhlo.num_partitions = 1 : i32`), which
the StableHLO -> VHLO legalization leaves untouched.
"""

from __future__ import annotations

import re

import numpy as np

import support
from stablehlo._src.bytecode import tree
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_printer
from stablehlo._src.text import dense
from stablehlo._src.text import diagnostics
from stablehlo._src.text import lexer as lx
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import sdy_conversion
from stablehlo._src.vhlo import type_conversion as tc

ConversionError = tc.ConversionError
DIALECT = "builtin"

_FLOAT_KINDS = {"bf16": "BFloat16Type", "f16": "Float16Type",
                "f32": "Float32Type", "f64": "Float64Type"}
_FLOAT_NAMES = {kind: name for name, kind in _FLOAT_KINDS.items()}


def ba(kind: str, *fields) -> tree.Attr:
  return tree.Attr(DIALECT, kind, tuple(fields))


def bt(kind: str, *fields) -> tree.Type:
  return tree.Type(DIALECT, kind, tuple(fields))


_STRINGS: dict = {}


def string(value: str) -> tree.Attr:
  """The builtin StringAttr of `value`, one object per string (bounded):
  attribute names and file names repeat on every op, and the bytecode
  writer finds an entry it has seen by identity before hashing it."""
  attr = _STRINGS.get(value)
  if attr is None:
    if len(_STRINGS) >= 4096:
      _STRINGS.clear()
    attr = _STRINGS[value] = ba("StringAttr", value)
  return attr


UNKNOWN_LOC = ba("UnknownLoc")


# --- types ------------------------------------------------------------------------


def type_to_builtin(ty: t.Type) -> tree.Type:
  if isinstance(ty, t.IntegerType):
    signedness = 2 if ty.unsigned else (1 if ty.signed else 0)
    return bt("IntegerType", ty.width << 2 | signedness)
  if isinstance(ty, t.IndexType):
    return bt("IndexType")
  if isinstance(ty, t.NoneType):
    return bt("NoneType")
  if isinstance(ty, t.FloatType):
    if ty.name in _FLOAT_KINDS:
      return bt(_FLOAT_KINDS[ty.name])
    return tree.AsmType(DIALECT, ty.name.encode())
  if isinstance(ty, t.ComplexType):
    return bt("ComplexType", type_to_builtin(ty.element_type))
  if isinstance(ty, t.RankedTensorType) and ty.encoding is None:
    return bt("RankedTensorType", tuple(tc.DYNAMIC if d is None else d
                                        for d in ty.shape),
              type_to_builtin(ty.element_type))
  if isinstance(ty, t.UnrankedTensorType):
    return bt("UnrankedTensorType", type_to_builtin(ty.element_type))
  if isinstance(ty, t.TupleType):
    return bt("TupleType", tuple(type_to_builtin(x) for x in ty.types))
  if isinstance(ty, t.FunctionType):
    return bt("FunctionType", tuple(type_to_builtin(x) for x in ty.inputs),
              tuple(type_to_builtin(x) for x in ty.results))
  raise support.UnimplementedError(
      f"type {attr_printer.format_type(ty)} in a module attribute is not "
      "supported in portable artifacts")


# `!stablehlo.token` where it crosses into an sdy region of a mixed
# artifact: the stablehlo dialect's own bytecode, type code 0 (kTokenType)
# as a varint.
STABLEHLO_TOKEN = tree.OpaqueType("stablehlo", b"\x01")


def type_from_builtin(ty) -> t.Type:
  if isinstance(ty, tree.AsmType) and ty.dialect == DIALECT:
    return tc.parse_type_text(ty.text.decode("utf-8"))
  if not isinstance(ty, tree.Type) or ty.dialect != DIALECT:
    raise ConversionError(f"unsupported type {ty!r} in a builtin attribute")
  kind, f = ty.kind, ty.fields
  if kind == "IntegerType":
    width, signedness = f[0] >> 2, f[0] & 3
    return t.IntegerType(width, unsigned=signedness == 2,
                         signed=signedness == 1)
  if kind == "IndexType":
    return t.IndexType()
  if kind == "NoneType":
    return t.NoneType()
  if kind in _FLOAT_NAMES:
    return t.FloatType(_FLOAT_NAMES[kind])
  if kind == "ComplexType":
    return t.ComplexType(type_from_builtin(f[0]))
  if kind == "RankedTensorType":
    return t.RankedTensorType(tuple(None if d == tc.DYNAMIC else d
                                    for d in f[0]), type_from_builtin(f[1]))
  if kind == "UnrankedTensorType":
    return t.UnrankedTensorType(type_from_builtin(f[0]))
  if kind == "TupleType":
    return t.TupleType(tuple(type_from_builtin(x) for x in f[0]))
  if kind == "FunctionType":
    return t.FunctionType(tuple(type_from_builtin(x) for x in f[0]),
                          tuple(type_from_builtin(x) for x in f[1]))
  raise ConversionError(f"builtin type {kind} is not supported here")


# --- attributes -------------------------------------------------------------------


def _int_width(ty: t.Type) -> int:
  return 64 if isinstance(ty, t.IndexType) else ty.width


def attr_to_builtin(attr: a.Attribute):
  """The builtin bytecode attribute for one of our attributes (Shardy
  attributes keep their own encoding)."""
  if isinstance(attr, sdy.SdyAttr) or sdy_conversion.is_sdy_text(attr):
    return sdy_conversion.to_tree(attr)
  if isinstance(attr, a.UnitAttr):
    return ba("UnitAttr")
  if isinstance(attr, a.BoolAttr):
    return ba("IntegerAttr", type_to_builtin(t.IntegerType(1)),
              1 if attr.value else 0)
  if isinstance(attr, a.IntegerAttr):
    return ba("IntegerAttr", type_to_builtin(attr.type),
              int(attr.value) & ((1 << _int_width(attr.type)) - 1))
  if isinstance(attr, a.FloatAttr):
    return ba("FloatAttr", type_to_builtin(attr.type),
              dense.float_to_bits(attr.value, attr.type))
  if isinstance(attr, a.StringAttr):
    if attr.type is not None:
      return ba("StringAttrWithType", attr.value, type_to_builtin(attr.type))
    return string(attr.value)
  if isinstance(attr, a.TypeAttr):
    return ba("TypeAttr", type_to_builtin(attr.value))
  if isinstance(attr, a.ArrayAttr):
    return ba("ArrayAttr", tuple(attr_to_builtin(e) for e in attr.elements))
  if isinstance(attr, a.DictionaryAttr):
    return dictionary(attr.entries)
  if isinstance(attr, a.SymbolRefAttr):
    if not attr.nested:
      return ba("FlatSymbolRefAttr", string(attr.root))
    return ba("SymbolRefAttr", string(attr.root),
              tuple(ba("FlatSymbolRefAttr", string(n)) for n in attr.nested))
  if isinstance(attr, a.DenseElementsAttr):
    return ba("DenseIntOrFPElementsAttr", type_to_builtin(attr.type),
              ac.dense_blob(attr.type, attr.array, attr.splat))
  if isinstance(attr, a.DenseArrayAttr):
    dtype = dense.numpy_dtype(attr.element_type)
    raw = np.asarray(attr.values, dtype=dtype)
    if dtype == np.bool_:
      raw = raw.astype(np.uint8)
    return ba("DenseArrayAttr", type_to_builtin(attr.element_type),
              len(attr.values), raw.astype(raw.dtype.newbyteorder("<"))
              .tobytes())
  raise support.UnimplementedError(
      f"attribute {_spell(attr)} on the module is not supported in portable "
      "artifacts (only builtin attributes are)")


def dictionary(entries) -> tree.Attr:
  pairs = sorted(((k, attr_to_builtin(v)) for k, v in entries),
                 key=lambda e: e[0])
  return ba("DictionaryAttr", tuple((string(k), v) for k, v in pairs))


def attr_from_builtin(attr) -> a.Attribute:
  if sdy_conversion.is_sdy(attr):
    return sdy_conversion.from_tree(attr)
  if isinstance(attr, tree.AsmAttr):
    return ac.parse_attr_text(attr.text.decode("utf-8"))
  if not isinstance(attr, tree.Attr) or attr.dialect != DIALECT:
    raise support.UnimplementedError(
        f"module attribute of dialect {getattr(attr, 'dialect', '?')} is not "
        "supported")
  kind, f = attr.kind, attr.fields
  if kind == "UnitAttr":
    return a.UnitAttr()
  if kind == "IntegerAttr":
    ty = type_from_builtin(f[0])
    if isinstance(ty, t.IntegerType) and ty.width == 1 and not ty.unsigned \
        and not ty.signed:
      return a.BoolAttr(bool(f[1]))
    value = f[1]
    width = _int_width(ty)
    if not (isinstance(ty, t.IntegerType) and ty.unsigned) and width > 1 and \
        value >> (width - 1):
      value -= 1 << width
    return a.IntegerAttr(value, ty)
  if kind == "FloatAttr":
    ty = type_from_builtin(f[0])
    return a.FloatAttr(float(dense.float_from_bits(f[1], ty)), ty)
  if kind == "StringAttr":
    return a.StringAttr(f[0])
  if kind == "StringAttrWithType":
    return a.StringAttr(f[0], type_from_builtin(f[1]))
  if kind == "TypeAttr":
    return a.TypeAttr(type_from_builtin(f[0]))
  if kind == "ArrayAttr":
    return a.ArrayAttr(tuple(attr_from_builtin(x) for x in f[0]))
  if kind == "DictionaryAttr":
    return a.DictionaryAttr(tuple((k.fields[0], attr_from_builtin(v))
                                  for k, v in f[0]))
  if kind == "FlatSymbolRefAttr":
    return a.SymbolRefAttr(f[0].fields[0])
  if kind == "SymbolRefAttr":
    return a.SymbolRefAttr(f[0].fields[0],
                           tuple(x.fields[0].fields[0] for x in f[1]))
  if kind == "DenseIntOrFPElementsAttr":
    vhlo_like = tree.Attr("vhlo", "TensorV1Attr",
                          (ac.type_to_vhlo(type_from_builtin(f[0])), f[1]))
    result = ac.dense_from_vhlo(vhlo_like)
    return a.DenseElementsAttr(type_from_builtin(f[0]), result.array,
                               result.splat)
  if kind == "DenseArrayAttr":
    et = type_from_builtin(f[0])
    dtype = dense.numpy_dtype(et)
    if dtype == np.bool_:
      values = tuple(bool(x) for x in f[2])
    else:
      arr = np.frombuffer(f[2], dtype=dtype.newbyteorder("<"))
      values = tuple(x.item() for x in arr)
    return a.DenseArrayAttr(et, values)
  raise support.UnimplementedError(f"builtin attribute {kind} is not supported")


def _spell(attr) -> str:
  try:
    return attr_printer.format_attr(attr)
  except Exception:  # pylint: disable=broad-except
    return type(attr).__name__


# --- locations --------------------------------------------------------------------


class _LocParser:
  """Parses the body of `loc(...)` as MLIR prints it (aliases resolved)."""

  def __init__(self, text: str, aliases: dict):
    self.lex = lx.Lexer(text, diagnostics.SourceMap(text, "<location>"))
    self.aliases = aliases
    self.depth = 0

  def fail(self, what: str):
    raise ConversionError(f"cannot read location: {what}")

  def peek(self):
    return self.lex.peek()

  def next(self):
    return self.lex.next()

  def punct(self, p: str) -> bool:
    tok = self.peek()
    if tok.kind == lx.PUNCT and tok.text == p:
      self.next()
      return True
    return False

  def expect(self, p: str):
    if not self.punct(p):
      self.fail(f"expected '{p}'")

  def parse(self):
    self.depth += 1
    if self.depth > 100:
      self.fail("nesting too deep")
    try:
      return self._parse()
    finally:
      self.depth -= 1

  def _parse(self):
    tok = self.next()
    if tok.kind == lx.BARE_ID and tok.text == "loc":
      self.expect("(")
      loc = self.parse()
      self.expect(")")
      return loc
    if tok.kind == lx.BARE_ID and tok.text == "unknown":
      return UNKNOWN_LOC
    if tok.kind == lx.HASH_ID:
      target = self.aliases.get(tok.text[1:])
      if target is None:
        self.fail(f"undefined location alias {tok.text}")
      return location_to_builtin(target, self.aliases, self.depth)
    if tok.kind == lx.STRING:
      name = lx.unescape_string(tok.text[1:-1])
      if self.punct(":"):
        line = self._int()
        self.expect(":")
        col = self._int()
        if self.peek().is_keyword("to"):
          self.next()
          if self.punct(":"):
            end_line, end_col = line, self._int()
          else:
            end_line = self._int()
            self.expect(":")
            end_col = self._int()
          return file_range(name, line, col, end_line, end_col)
        return ba("FileLineColLoc", string(name), line, col)
      if self.punct("("):
        child = self.parse()
        self.expect(")")
        return ba("NameLoc", string(name), child)
      return ba("NameLoc", string(name), UNKNOWN_LOC)
    if tok.kind == lx.BARE_ID and tok.text == "callsite":
      self.expect("(")
      callee = self.parse()
      at = self.next()
      if not at.is_keyword("at"):
        self.fail("expected 'at' in callsite location")
      caller = self.parse()
      self.expect(")")
      return ba("CallSiteLoc", callee, caller)
    if tok.kind == lx.BARE_ID and tok.text == "fused":
      metadata = None
      if self.punct("<"):
        metadata = self._metadata()
      self.expect("[")
      locs = []
      if not self.punct("]"):
        locs.append(self.parse())
        while self.punct(","):
          locs.append(self.parse())
        self.expect("]")
      if metadata is None:
        return ba("FusedLoc", tuple(locs))
      return ba("FusedLocWithMetadata", tuple(locs), metadata)
    self.fail(f"unexpected {tok.text!r}")

  def _int(self) -> int:
    tok = self.next()
    if tok.kind != lx.INTEGER:
      self.fail("expected an integer")
    return int(tok.text, 0)

  def _metadata(self):
    tok = self.next()
    if tok.kind != lx.STRING:
      self.fail("only string metadata is supported in fused locations")
    self.expect(">")
    return string(lx.unescape_string(tok.text[1:-1]))


def file_range(filename: str, line: int, col: int, end_line: int,
               end_col: int):
  """A builtin FileLineColRange; the fewest numbers that keep the range.

  The bytecode stores 0-4 numbers: none (all zero), [line] (column 0, end
  = start line, column 0), [line, col] (end = start), [line, col, end col]
  (one line) or [line, col, end line, end col]. MLIR's writer picks the
  same forms, except that it also writes [line] for a one-line range that
  starts at column 0 and loses the end column there; this keeps it.
  """
  nums = tuple(int(x) for x in (line, col, end_line, end_col))
  if any(x < 0 for x in nums):
    raise ConversionError(f"negative line or column in {nums}")
  if nums == (0, 0, 0, 0):
    raw = ()
  elif (col, end_line, end_col) == (0, line, 0):
    raw = (line,)
  elif (end_line, end_col) == (line, col):
    raw = (line, col)
  elif end_line == line:
    raw = (line, col, end_col)
  else:
    raw = nums
  return ba("FileLineColRange", string(filename), tuple(int(x) for x in raw))


def range_numbers(attr) -> tuple:
  """(line, col, end line, end col) of a builtin FileLineColRange."""
  raw = attr.fields[1]
  if len(raw) == 0:
    return 0, 0, 0, 0
  if len(raw) == 1:
    return raw[0], 0, raw[0], 0
  if len(raw) == 2:
    return raw[0], raw[1], raw[0], raw[1]
  if len(raw) == 3:
    return raw[0], raw[1], raw[0], raw[2]
  if len(raw) == 4:
    return tuple(raw)
  raise ConversionError(
      f"file location range with {len(raw)} numbers (at most 4)")


_FILE_LOC_TEXT_RE = re.compile(r'".*":[0-9]+:[0-9]+', re.S)


# id(file Location) -> (the location, its builtin attribute): locations
# are immutable, and a parsed module has one per op. Emptied when full.
# Public for callers that look a location up before calling
# location_to_builtin (once per op).
FILE_LOCATIONS: dict = {}
_FILE_LOCATIONS_LIMIT = 1 << 15


def _file_location(loc):
  """The builtin attribute of a "file" location spelled as one, else None."""
  if loc.end_line is not None or loc.end_col is not None:
    end_line = loc.line if loc.end_line is None else loc.end_line
    end_col = loc.col if loc.end_col is None else loc.end_col
    return file_range(loc.filename or "", loc.line, loc.col, end_line,
                      end_col)
  if loc.text is None or _FILE_LOC_TEXT_RE.fullmatch(loc.text):
    return ba("FileLineColLoc", string(loc.filename or ""), int(loc.line),
              int(loc.col))
  return None


def location_to_builtin(loc, aliases=None, depth: int = 0):
  """The builtin location attribute of one of our `Location`s."""
  if loc is None or loc.kind == "unknown":
    return UNKNOWN_LOC
  if loc.kind == "file":
    hit = FILE_LOCATIONS.get(id(loc))
    if hit is not None and hit[0] is loc:
      return hit[1]
    converted = _file_location(loc)
    if converted is not None:
      if len(FILE_LOCATIONS) >= _FILE_LOCATIONS_LIMIT:
        FILE_LOCATIONS.clear()
      FILE_LOCATIONS[id(loc)] = (loc, converted)
      return converted
  if loc.text is None:
    return UNKNOWN_LOC
  parser = _LocParser(loc.text, aliases or {})
  parser.depth = depth
  result = parser.parse()
  if parser.peek().kind != lx.EOF:
    parser.fail(f"trailing text in {loc.text!r}")
  return result


_LOC_KINDS = ("UnknownLoc", "FileLineColLoc", "FileLineColRange", "NameLoc",
              "CallSiteLoc", "FusedLoc", "FusedLocWithMetadata")


def _loc_string(attr, what: str) -> str:
  """The text of the StringAttr a location refers to; a clear error when a
  (corrupt) artifact puts another attribute there."""
  if (isinstance(attr, tree.Attr) and attr.kind == "StringAttr" and
      attr.fields and isinstance(attr.fields[0], str)):
    return attr.fields[0]
  raise ConversionError(f"{what}: expected a string attribute, got "
                        f"{getattr(attr, 'kind', type(attr).__name__)}")


# The fields each location kind has at least.
_LOC_FIELDS = {"FileLineColLoc": 3, "FileLineColRange": 2, "NameLoc": 2,
               "CallSiteLoc": 2, "FusedLoc": 1, "FusedLocWithMetadata": 2}


def _check_location(attr) -> None:
  """Rejects a location whose fields have the wrong kinds (corrupt input).
  Only `attr` itself: the locations it nests are checked where they are
  read (location_text, once per shared object), where a check of the
  whole chain at every level of JAX's call-site chains cost time
  quadratic in their depth."""
  if (not isinstance(attr, tree.Attr) or attr.dialect != DIALECT or
      attr.kind not in _LOC_KINDS):
    raise ConversionError(
        f"not a builtin location: {getattr(attr, 'kind', attr)!r}")
  kind, f = attr.kind, attr.fields
  if len(f) < _LOC_FIELDS.get(kind, 0):
    raise ConversionError(f"{kind} with {len(f)} fields")
  if kind == "FileLineColLoc":
    _loc_string(f[0], "file location")
    if not (isinstance(f[1], int) and isinstance(f[2], int)):
      raise ConversionError("file location with a non-integer line/column")
  elif kind == "FileLineColRange":
    _loc_string(f[0], "file location range")
    if (not isinstance(f[1], (tuple, list)) or
        not all(isinstance(x, int) for x in f[1])):
      raise ConversionError("file location range with non-integer numbers")
  elif kind == "NameLoc":
    _loc_string(f[0], "name location")
  elif kind in ("FusedLoc", "FusedLocWithMetadata"):
    if not isinstance(f[0], (tuple, list)):
      raise ConversionError(f"{kind} without a location list")


# id(attr) -> (attr, text): a bytecode reader shares one object per entry
# of its attribute table, and JAX's call-site chains share their tails, so
# texts are made once per object (the identity check makes a reused id a
# miss). Bounded: cleared when full.
_LOCATION_TEXTS: dict[int, tuple[object, str]] = {}
_LOCATION_TEXTS_MAX = 1 << 16


def location_text(attr) -> str:
  """MLIR's spelling of a builtin location (the body of `loc(...)`)."""
  hit = _LOCATION_TEXTS.get(id(attr))
  if hit is not None and hit[0] is attr:
    return hit[1]
  text = _location_text(attr)
  if len(_LOCATION_TEXTS) >= _LOCATION_TEXTS_MAX:
    _LOCATION_TEXTS.clear()
  _LOCATION_TEXTS[id(attr)] = (attr, text)
  return text


# A module's ops share a few file names: each is escaped once.
_QUOTED_FILENAMES: dict[str, str] = {}


def _quoted_filename(name: str) -> str:
  quoted = _QUOTED_FILENAMES.get(name)
  if quoted is None:
    if len(_QUOTED_FILENAMES) >= 1024:
      _QUOTED_FILENAMES.clear()
    quoted = _QUOTED_FILENAMES[name] = attr_printer.format_string(name)
  return quoted


def _location_text(attr) -> str:
  _check_location(attr)  # Nested locations: by location_text below.
  kind, f = attr.kind, attr.fields
  if kind == "UnknownLoc":
    return "unknown"
  if kind == "FileLineColLoc":
    return f"{_quoted_filename(f[0].fields[0])}:{f[1]}:{f[2]}"
  if kind == "FileLineColRange":
    line, col, end_line, end_col = range_numbers(attr)
    text = f"{_quoted_filename(f[0].fields[0])}:{line}:{col}"
    if (end_line, end_col) == (line, col):
      return text
    if end_line == line:
      return f"{text} to :{end_col}"
    return f"{text} to {end_line}:{end_col}"
  if kind == "NameLoc":
    name = attr_printer.format_string(f[0].fields[0])
    inner = location_text(f[1])
    if f[1].kind == "UnknownLoc":
      return name
    return f"{name}({inner})"
  if kind == "CallSiteLoc":
    return f"callsite({location_text(f[0])} at {location_text(f[1])})"
  if kind in ("FusedLoc", "FusedLocWithMetadata"):
    body = "[" + ", ".join(location_text(x) for x in f[0]) + "]"
    if kind == "FusedLoc":
      return "fused" + body
    meta = f[1]
    if isinstance(meta, tree.Attr) and meta.kind == "StringAttr":
      return f"fused<{attr_printer.format_string(meta.fields[0])}>" + body
    return "fused" + body
  raise ConversionError(f"unsupported location kind {kind}")


_LOCATIONS: dict[int, tuple[object, a.Location]] = {}


def forget_locations() -> None:
  """Empties the per-object location tables. They only help while the
  attribute objects of one artifact are alive; kept past it they hold
  every location of the last artifacts alive, and the cyclic collector
  walks them in each full collection."""
  _LOCATIONS.clear()
  _LOCATION_TEXTS.clear()


# (file name, line, column) -> our Location (immutable, so shared by the
# ops and artifacts that hold it); emptied when full. Most ops of an
# artifact have a file location of their own, which no per-object table
# of one artifact's entries sees twice.
_FILE_LOCATIONS_READ: dict = {}


def location_from_builtin(attr) -> a.Location:
  if attr is None:
    return a.UNKNOWN_LOC
  if attr.__class__ is tree.Attr and attr.kind == "FileLineColLoc" and \
      attr.dialect == DIALECT and len(attr.fields) == 3:
    name, line, col = attr.fields
    if name.__class__ is tree.Attr and name.kind == "StringAttr" and \
        name.fields and name.fields[0].__class__ is str and \
        line.__class__ is int and col.__class__ is int:
      # What _location_from_builtin makes of it, by content.
      key = (name.fields[0], line, col)
      location = _FILE_LOCATIONS_READ.get(key)
      if location is None:
        if len(_FILE_LOCATIONS_READ) >= _LOCATION_TEXTS_MAX:
          _FILE_LOCATIONS_READ.clear()
        location = _FILE_LOCATIONS_READ[key] = a.file_location(
            key[0], line, col, f"{_quoted_filename(key[0])}:{line}:{col}")
      return location
  if isinstance(attr, tree.Attr) and attr.kind == "UnknownLoc":
    return a.UNKNOWN_LOC
  hit = _LOCATIONS.get(id(attr))
  if hit is not None and hit[0] is attr:
    return hit[1]
  location = _location_from_builtin(attr)
  if len(_LOCATIONS) >= _LOCATION_TEXTS_MAX:
    _LOCATIONS.clear()
  _LOCATIONS[id(attr)] = (attr, location)
  return location


def _location_from_builtin(attr) -> a.Location:
  _check_location(attr)  # Nested locations: by location_text.
  if isinstance(attr, tree.Attr) and attr.kind == "FileLineColLoc":
    f = attr.fields
    return a.file_location(f[0].fields[0], f[1], f[2], location_text(attr))
  if isinstance(attr, tree.Attr) and attr.kind == "FileLineColRange":
    line, col, end_line, end_col = range_numbers(attr)
    return a.Location("file", attr.fields[0].fields[0], line, col,
                      text=location_text(attr), end_line=end_line,
                      end_col=end_col)
  text = location_text(attr)
  kind = {"NameLoc": "name", "CallSiteLoc": "callsite", "FusedLoc": "fused",
          "FusedLocWithMetadata": "fused"}.get(attr.kind, "opaque")
  return a.Location(kind, text=text)
