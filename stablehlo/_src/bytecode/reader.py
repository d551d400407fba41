"""Reads an MLIR bytecode file (versions 0..6) into the generic tree.

The structure follows MLIR's `mlir/docs/BytecodeFormat.md` and
`BytecodeReader.cpp`: header, then sections in any order (string, dialect,
attribute/type offsets + data, IR, optional resources, properties from
version 5). Attributes and types are decoded lazily through the dialect
codecs registered in `codec.py` (builtin, VHLO and sdy are always loaded).

Malformed input raises `support.DataLossError` (with the file offset), an
unsupported version `support.InvalidArgumentError`; nothing else escapes.
"""

from __future__ import annotations

import support
from stablehlo._src.bytecode import builtin_codec
from stablehlo._src.bytecode import codec
from stablehlo._src.bytecode import encoding
from stablehlo._src.bytecode import sdy_codec  # pylint: disable=unused-import
from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import vhlo_codec  # pylint: disable=unused-import

Section = encoding.Section
_RESOURCE_KINDS = {0: "blob", 1: "bool", 2: "string"}


def read(data: bytes, op_class=tree.Op) -> tree.BytecodeFile:
  """Parses a whole bytecode file. Its ops are made as
  `op_class(name, location)`: a subclass of `tree.Op` whose other fields
  have defaults."""
  data = bytes(data)
  try:
    return _FileReader(data, op_class).read()
  except RecursionError as e:
    raise support.DataLossError(
        "malformed MLIR bytecode: nesting too deep (cyclic references?)") from e


def is_bytecode(data: bytes) -> bool:
  return bytes(data[:4]) == encoding.MAGIC


class _Entry:
  __slots__ = ("dialect", "custom", "start", "end", "value", "busy")

  def __init__(self, dialect, custom, start, end):
    self.dialect, self.custom, self.start, self.end = dialect, custom, start, end
    self.value = None
    self.busy = False


class _FileReader(codec.DecodeContext):
  """Holds the state of one parse."""

  def __init__(self, data: bytes, op_class=tree.Op):
    self.data = data
    self.op_class = op_class
    self.r = encoding.Reader(data)
    self.version = 0
    self.strings: list = []
    self.dialects: list = []
    self.dialect_versions: dict = {}
    self.op_names: list = []  # (full name, registered or None)
    self.attrs: list = []
    self.types: list = []
    self.resource_handles: list = []
    self.resources: list = []
    self.properties: list = []  # (start, end) of each properties blob.
    self.decoded_properties: dict = {}
    self.next_value_id = 0

  # --- Header and sections -------------------------------------------------

  def read(self) -> tree.BytecodeFile:
    r = self.r
    if r.remaining() < 4 or r.bytes(4, "magic") != encoding.MAGIC:
      raise r.error("not MLIR bytecode (bad magic number)", 0)
    at = r.pos
    self.version = r.varint("bytecode version")
    if self.version > encoding.MAX_VERSION:
      raise support.InvalidArgumentError(
          f"MLIR bytecode at offset {at}: version {self.version} is newer "
          f"than the newest supported ({encoding.MAX_VERSION})")
    try:
      producer = r.nul_string("producer").decode("utf-8")
    except UnicodeDecodeError as e:
      raise r.error("producer is not UTF-8") from e
    sections = {}
    while not r.at_end():
      at = r.pos
      section_id, body = r.section()
      if section_id == Section.DIALECT_VERSIONS:
        raise r.error("dialect versions section at top level", at)
      if section_id in sections:
        raise r.error(f"duplicate section {Section(section_id).name}", at)
      sections[section_id] = body
    required = [Section.STRING, Section.DIALECT, Section.ATTR_TYPE,
                Section.ATTR_TYPE_OFFSET, Section.IR]
    if self.version >= encoding.V_NATIVE_PROPERTIES:
      required.append(Section.PROPERTIES)
    for section_id in required:
      if section_id not in sections:
        raise r.error(f"missing section {section_id.name}")
    if (Section.RESOURCE in sections) != (Section.RESOURCE_OFFSET in sections):
      raise r.error("resource and resource offset sections must come together")
    if (Section.PROPERTIES in sections and
        self.version < encoding.V_NATIVE_PROPERTIES):
      raise r.error(f"properties section in bytecode version {self.version}")

    self._read_strings(sections[Section.STRING])
    self._read_dialects(sections[Section.DIALECT])
    self._read_attr_type_offsets(sections[Section.ATTR_TYPE_OFFSET],
                                 sections[Section.ATTR_TYPE])
    if Section.RESOURCE in sections:
      self._read_resources(sections[Section.RESOURCE_OFFSET],
                           sections[Section.RESOURCE])
    if Section.PROPERTIES in sections:
      self._read_properties_section(sections[Section.PROPERTIES])
    root = self._read_ir(sections[Section.IR])
    # Decode every entry, also unreferenced ones, so corruption anywhere in
    # the attribute/type section is reported.
    for table, what in ((self.attrs, "attribute"), (self.types, "type")):
      for i, entry in enumerate(table):
        if entry.value is None:
          self._resolve(table, i, self.r, what)
    return tree.BytecodeFile(
        version=self.version, producer=producer, root=root,
        dialect_versions=self.dialect_versions,
        unregistered_ops={n for n, reg in self.op_names if reg is False},
        resources=self.resources)

  def _read_strings(self, r: encoding.Reader) -> None:
    n = r.count("string count")
    data = r.data
    sizes = data[r.pos:r.pos + n]
    if len(sizes) == n and all(b & 1 for b in sizes):  # one-byte sizes
      r.pos += n
      sizes = [b >> 1 for b in reversed(sizes)]
      # The strings, back to back, each with its NUL: one split when no
      # string holds a NUL of its own.
      pieces = data[r.pos:r.end].split(b"\0")
      if (len(pieces) == n + 1 and not pieces[-1] and
          all(len(p) + 1 == size for p, size in zip(pieces, sizes))):
        try:
          self.strings.extend([p.decode("utf-8") for p in pieces[:-1]])
          r.pos = r.end
          return
        except UnicodeDecodeError:
          pass  # the loop below reports which one
    else:
      sizes = [r.varint("string size") for _ in range(n)][::-1]
    if sum(sizes) != r.remaining():
      raise r.error(f"string sizes add up to {sum(sizes)}, section holds "
                    f"{r.remaining()} bytes")
    for size in sizes:
      at = r.pos
      raw = r.bytes(size, "string")
      if not raw or raw[-1] != 0:
        raise r.error("string is not NUL-terminated", at)
      try:
        self.strings.append(raw[:-1].decode("utf-8"))
      except UnicodeDecodeError as e:
        raise r.error("string is not UTF-8", at) from e

  def _string(self, r: encoding.Reader, what: str = "string index") -> str:
    return self.strings[r.index(len(self.strings), what)]

  def _read_dialects(self, r: encoding.Reader) -> None:
    n = r.count("dialect count")
    for _ in range(n):
      if self.version >= encoding.V_DIALECT_VERSIONING:
        at = r.pos
        index, has_version = r.varint_with_flag("dialect name")
        if index >= len(self.strings):
          raise r.error(f"dialect name index {index} out of range", at)
        name = self.strings[index]
        if has_version:
          at = r.pos
          section_id, body = r.section()
          if section_id != Section.DIALECT_VERSIONS:
            raise r.error(f"expected a dialect version section, got "
                          f"{section_id}", at)
          self.dialect_versions[name] = body.bytes(body.remaining())
      else:
        name = self._string(r, "dialect name")
      self.dialects.append(name)
    expected = None
    if self.version >= encoding.V_ELIDE_UNKNOWN_BLOCK_ARG_LOCATION:
      expected = r.varint("op name count")
    while not r.at_end():
      dialect = self.dialects[r.index(len(self.dialects), "dialect number")]
      for _ in range(r.count("op name group size")):
        if self.version >= encoding.V_NATIVE_PROPERTIES:
          at = r.pos
          index, registered = r.varint_with_flag("op name")
          if index >= len(self.strings):
            raise r.error(f"op name index {index} out of range", at)
          name = self.strings[index]
        else:
          name, registered = self._string(r, "op name"), None
        self.op_names.append((f"{dialect}.{name}", registered))
    if expected is not None and expected != len(self.op_names):
      raise r.error(f"op name count {expected} != {len(self.op_names)} read")

  def _read_attr_type_offsets(self, r: encoding.Reader,
                              data: encoding.Reader) -> None:
    num_attrs = r.count("attribute count")
    num_types = r.count("type count")
    offset = data.pos
    for table, total in ((self.attrs, num_attrs), (self.types, num_types)):
      while len(table) < total:
        dialect = self.dialects[r.index(len(self.dialects), "dialect number")]
        at = r.pos
        group = r.count("attribute/type group size")
        if len(table) + group > total:
          raise r.error("attribute/type group overflows the count", at)
        for _ in range(group):
          p = r.pos
          first = r.data[p] if p < r.end else 0
          if first & 1:  # a one-byte size: most entries
            r.pos = p + 1
            size, custom = first >> 2, bool(first & 2)
          else:
            size, custom = r.varint_with_flag("attribute/type size")
          if size > data.end - offset:
            raise r.error("attribute/type entry runs past its section")
          table.append(_Entry(dialect, custom, offset, offset + size))
          offset += size
    if not r.at_end():
      raise r.error("trailing bytes in the attribute/type offset section")
    if offset != data.end:
      raise data.error("attribute/type data section has unreferenced bytes",
                       offset)

  def _read_resources(self, r: encoding.Reader, data: encoding.Reader) -> None:
    def entries(group: tree.ResourceGroup, dialect: str | None):
      for _ in range(r.count("resource count")):
        key = self._string(r, "resource key")
        size = r.varint("resource size")
        at = r.pos
        kind = _RESOURCE_KINDS.get(r.byte("resource kind"))
        if kind is None:
          raise r.error("unknown resource kind", at)
        body = data.sub(size, "resource")
        group.entries.append(self._resource_entry(key, kind, body))
        if dialect is not None:
          self.resource_handles.append(tree.ResourceHandle(dialect, key))

    for _ in range(r.count("external resource group count")):
      group = tree.ResourceGroup(self._string(r, "resource group"),
                                 external=True)
      entries(group, None)
      self.resources.append(group)
    while not r.at_end():
      dialect = self.dialects[r.index(len(self.dialects), "dialect number")]
      group = tree.ResourceGroup(dialect)
      entries(group, dialect)
      self.resources.append(group)
    if not data.at_end():
      raise data.error("resource section has unreferenced bytes")

  def _resource_entry(self, key, kind, body: encoding.Reader):
    if body.at_end():
      return tree.ResourceEntry(key, kind, None)
    if kind == "bool":
      value = body.byte("resource bool")
      if value > 1:
        raise body.error("resource bool is not 0 or 1", body.pos - 1)
      entry = tree.ResourceEntry(key, kind, bool(value))
    elif kind == "string":
      entry = tree.ResourceEntry(key, kind, self._string(body, "resource"))
    else:
      alignment = body.varint("resource alignment")
      size = body.varint("resource blob size")
      body.align(alignment)
      entry = tree.ResourceEntry(key, kind, body.bytes(size, "blob"),
                                 alignment)
    if not body.at_end():
      raise body.error("trailing bytes in resource entry")
    return entry

  def _read_properties_section(self, r: encoding.Reader) -> None:
    for _ in range(r.count("properties count")):
      size = r.varint("properties size")
      body = r.sub(size, "properties")
      self.properties.append((body.pos, body.end))
    if not r.at_end():
      raise r.error("trailing bytes in the properties section")

  # --- DecodeContext: lazily decoded attributes and types --------------------

  def attr(self, index: int, r: encoding.Reader):
    attrs = self.attrs
    if index < len(attrs):  # an entry decoded before: most references
      value = attrs[index].value
      if value is not None:
        return value
    return self._resolve(attrs, index, r, "attribute")

  def type(self, index: int, r: encoding.Reader):
    types = self.types
    if index < len(types):
      value = types[index].value
      if value is not None:
        return value
    return self._resolve(types, index, r, "type")

  def string(self, index: int, r: encoding.Reader) -> str:
    if index >= len(self.strings):
      raise r.error(f"string index {index} out of range")
    return self.strings[index]

  def resource(self, index: int, r: encoding.Reader):
    if index >= len(self.resource_handles):
      raise r.error(f"resource index {index} out of range")
    return self.resource_handles[index]

  def _resolve(self, table, index, r, what):
    if index >= len(table):
      raise r.error(f"{what} index {index} out of range ({len(table)})",
                    max(r.pos - 1, 0))
    entry = table[index]
    if entry.value is not None:
      return entry.value
    if entry.busy:
      raise r.error(f"{what} {index} refers to itself")
    entry.busy = True
    entry.value = self._decode_entry(entry, what == "attribute")
    entry.busy = False
    return entry.value

  def _decode_entry(self, entry: _Entry, is_attr: bool):
    body = encoding.Reader(self.data, entry.start, entry.end)
    what = "attribute" if is_attr else "type"
    if not entry.custom:
      text = body.nul_string(f"textual {what}")
      if not body.at_end():
        raise body.error(f"trailing bytes after textual {what}")
      return (tree.AsmAttr if is_attr else tree.AsmType)(entry.dialect, text)
    dialect_codec = codec.lookup(entry.dialect)
    if dialect_codec is None:
      raw = body.bytes(body.remaining())
      return (tree.OpaqueAttr if is_attr else tree.OpaqueType)(entry.dialect,
                                                               raw)
    at = body.pos
    first = self.data[at] if at < body.end else 0
    if first & 1:  # a one-byte kind code: nearly all
      body.pos = at + 1
      code = first >> 1
    else:
      code = body.varint("attribute kind" if is_attr else "type kind")
    found = dialect_codec.entry_reader(is_attr, code)
    if found is None:
      raise body.error(f"unknown {entry.dialect} {what} kind {code}", at)
    kind, read_fields = found
    fields = read_fields(body, self)
    if not body.at_end():
      raise body.error(f"trailing bytes after {entry.dialect}.{kind}")
    return (tree.Attr if is_attr else tree.Type)(entry.dialect, kind, fields)

  # --- IR --------------------------------------------------------------------

  def _read_ir(self, r: encoding.Reader) -> tree.Op:
    num_ops, has_args = r.varint_with_flag("IR section block")
    if num_ops != 1 or has_args:
      raise r.error("the IR section must hold exactly one root operation", 0)
    scope: list = []
    root = self._read_op(r, scope, [], None)
    if not r.at_end():
      raise r.error("trailing bytes after the root operation")
    return root

  def _new_value(self, type_, loc=None) -> tree.Value:
    value = tree.Value(type_, self.next_value_id, loc)
    self.next_value_id += 1
    return value

  def _operand(self, r, scope):
    at = r.pos
    index = r.varint("operand")
    if index >= len(scope):
      raise r.error(f"operand {index} out of range ({len(scope)} values)", at)
    if scope[index] is None:
      # A forward reference (graph regions, later blocks): define a
      # placeholder that the definition fills in.
      scope[index] = tree.Value(None)
    return scope[index]

  def _define(self, r, scope, slot, type_, loc=None) -> tree.Value:
    if slot[0] >= slot[1]:
      raise r.error("region defines more values than it declared")
    value = scope[slot[0]]
    if value is None:
      value = scope[slot[0]] = tree.Value(None)
    value.type, value.id, value.loc = type_, self.next_value_id, loc
    self.next_value_id += 1
    slot[0] += 1
    return value

  def _read_use_lists(self, r, num_values: int) -> list:
    count = r.count("use-list count") if num_values != 1 else 1
    orders = []
    for _ in range(count):
      index = r.index(num_values, "use-list value") if num_values != 1 else 0
      n, pairs = r.varint_with_flag("use-list size")
      if n > r.remaining():
        raise r.error("use-list size exceeds the remaining data")
      orders.append((index, pairs, tuple(r.varint() for _ in range(n))))
    return orders

  def _read_op(self, r, scope, blocks, slot) -> tree.Op:
    # One-byte varints (nearly all here) are read in place.
    data = r.data
    p = r.pos
    x = data[p] >> 1 if p < r.end and data[p] & 1 else -1
    if 0 <= x < len(self.op_names):
      r.pos = p + 1
    else:
      x = r.index(len(self.op_names), "op name")
    name, registered = self.op_names[x]
    at = r.pos
    mask = r.byte("op encoding mask")
    if mask & ~encoding.KNOWN_MASK_BITS:
      raise r.error(f"unknown op encoding mask bits {mask:#x}", at)
    if (mask & encoding.HAS_PROPERTIES and
        self.version < encoding.V_NATIVE_PROPERTIES):
      raise r.error("op properties before bytecode version 5", at)
    p = r.pos
    if p < r.end and data[p] & 1:
      r.pos = p + 1
      x = data[p] >> 1
    else:
      x = r.varint("op location")
    op = self.op_class(name, self.attr(x, r))
    if mask & encoding.HAS_ATTRS:
      op.attrs = self.attr(r.varint("op attributes"), r)
    if mask & encoding.HAS_PROPERTIES:
      p = r.pos
      x = data[p] >> 1 if p < r.end and data[p] & 1 else -1
      if 0 <= x < len(self.properties):
        r.pos = p + 1
      else:
        x = r.index(len(self.properties), "op properties")
      op.properties = self._op_properties(r, x, name, registered)
    result_types = []
    if mask & encoding.HAS_RESULTS:
      count = r.count("result count")
      for _ in range(count):
        p = r.pos
        if p < r.end and data[p] & 1:
          r.pos = p + 1
          x = data[p] >> 1
        else:
          x = r.varint("result type")
        result_types.append(self.type(x, r))
    if mask & encoding.HAS_OPERANDS:
      count = r.count("operand count")
      operands = op.operands = []
      for _ in range(count):
        p = r.pos
        x = data[p] >> 1 if p < r.end and data[p] & 1 else -1
        if 0 <= x < len(scope) and scope[x] is not None:
          r.pos = p + 1
          operands.append(scope[x])
        else:
          operands.append(self._operand(r, scope))
    if mask & encoding.HAS_SUCCESSORS:
      op.successors = [blocks[r.index(len(blocks), "successor")]
                       for _ in range(r.count("successor count"))]
    if mask & encoding.HAS_USE_LIST_ORDERS:
      op.use_list_orders = self._read_use_lists(r, len(result_types))
    if result_types and slot is None:
      raise r.error("the root operation cannot have results")
    op.results = [self._define(r, scope, slot, t) for t in result_types]
    if mask & encoding.HAS_INLINE_REGIONS:
      num_regions, isolated = r.varint_with_flag("region count")
      op.isolated = isolated
      inner_scope = [] if isolated else scope
      if isolated and self.version >= encoding.V_LAZY_LOADING:
        at = r.pos
        section_id, body = r.section()
        if section_id != Section.IR:
          raise r.error(f"expected an IR section, got {section_id}", at)
        if num_regions > body.remaining():
          raise r.error("region count exceeds the region data", at)
        op.regions = [self._read_region(body, inner_scope)
                      for _ in range(num_regions)]
        if not body.at_end():
          raise body.error("trailing bytes after isolated regions")
      else:
        if num_regions > r.remaining():
          raise r.error("region count exceeds the remaining data")
        op.regions = [self._read_region(r, inner_scope)
                      for _ in range(num_regions)]
    return op

  def _read_region(self, r, scope) -> tree.Region:
    num_blocks = r.count("block count")
    if num_blocks == 0:
      return tree.Region()
    num_values = r.count("region value count")
    blocks = [tree.Block() for _ in range(num_blocks)]
    first = len(scope)
    scope.extend([None] * num_values)
    slot = [first, first + num_values]
    for block in blocks:
      self._read_block(r, scope, blocks, block, slot)
    if slot[0] != slot[1]:
      raise r.error(f"region declared {num_values} values, defined "
                    f"{slot[0] - first}")
    for value in scope[first:]:
      if value is None or value.type is None:
        raise r.error("use of a value that is never defined")
    del scope[first:]
    return tree.Region(blocks)

  def _read_block(self, r, scope, blocks, block, slot) -> None:
    num_ops, has_args = r.varint_with_flag("block op count")
    if num_ops > r.remaining():
      raise r.error("block op count exceeds the remaining data")
    if has_args:
      for _ in range(r.count("block argument count")):
        if self.version >= encoding.V_ELIDE_UNKNOWN_BLOCK_ARG_LOCATION:
          type_index, has_loc = r.varint_with_flag("block argument type")
          type_ = self.type(type_index, r)
          loc = (self.attr(r.varint("block argument location"), r) if has_loc
                 else builtin_codec.unknown_loc())
        else:
          type_ = self.type(r.varint("block argument type"), r)
          loc = self.attr(r.varint("block argument location"), r)
        block.args.append(self._define(r, scope, slot, type_, loc))
      if self.version >= encoding.V_USE_LIST_ORDERING:
        at = r.pos
        mask = r.byte("block argument use-list mask")
        if mask & ~encoding.HAS_USE_LIST_ORDERS:
          raise r.error(f"bad block argument mask {mask:#x}", at)
        if mask:
          block.use_list_orders = self._read_use_lists(r, len(block.args))
    for _ in range(num_ops):
      block.ops.append(self._read_op(r, scope, blocks, slot))

  def _op_properties(self, r, index, name, registered):
    key = (index, name, registered)
    hit = self.decoded_properties.get(key)
    if hit is not None:
      return hit
    start, end = self.properties[index]
    body = encoding.Reader(self.data, start, end)
    if registered is False:
      kinds = ("attr",)
    else:
      dialect_codec = codec.lookup(name.split(".", 1)[0])
      kinds = dialect_codec.property_kinds(name) if dialect_codec else None
    if kinds is None:
      result = tree.RawProperties(body.bytes(body.remaining()))
    else:
      values = []
      if kinds == "attrs":
        while not body.at_end():
          values.append(self.attr(body.varint("property"), body))
        kinds = ("attr",) * len(values)
      else:
        for kind in kinds:
          if kind == "attr":  # most properties
            values.append(self.attr(body.varint("attribute reference"), body))
          else:
            values.append(codec.read_fields(None, (("", kind),), body,
                                            self)[0])
      if not body.at_end():
        raise body.error(f"trailing bytes in the properties of {name}")
      result = tree.Properties(tuple(kinds), tuple(values))
    self.decoded_properties[key] = result
    return result
