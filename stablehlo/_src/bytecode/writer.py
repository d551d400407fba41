"""Writes the generic tree as MLIR bytecode, the way upstream MLIR does.

To make output byte-identical to upstream's for the same IR, this follows
MLIR's `BytecodeWriter.cpp` and `IRNumbering.cpp` rules:
  * sections in the order dialect, attr/type offsets, attr/type data, IR,
    resource offsets, resources, strings, properties (ids 1,3,2,4,6,5,0,8);
  * attributes, types and op names numbered in first-visit order (root op,
    then regions from a worklist stack), stable-sorted by use count
    (descending), then grouped by dialect within each varint byte-width band;
  * dialects in first-visit order; strings in first-insertion order;
  * regions that use no value from outside their op are "isolated": value
    numbering restarts at 0 and (from version 2) they go in a sub-section;
  * properties blobs deduplicated in first-emission order.
Use-list orders read from a file are written back as they were.
"""

from __future__ import annotations

import operator

import support
from stablehlo._src.bytecode import builtin_codec
from stablehlo._src.bytecode import codec
from stablehlo._src.bytecode import encoding
from stablehlo._src.bytecode import tree

Section = encoding.Section
_RESOURCE_KIND_CODES = {"blob": 0, "bool": 1, "string": 2}
_PROPERTY_WRITERS: dict = {}  # property kinds -> their write function
_CODED = (tree.Attr, tree.Type)  # entries a codec writes field by field
# A numbering record is a list [0: value, 1: dialect number, 2: reference
# count, 3: number (-1 until assigned), 4: write function of an Attr / Type
# entry or None], made once per entry (cheaper than an object) and read by
# index.
_REFS = operator.itemgetter(2)
_DIALECT = operator.itemgetter(1)


def write(f: tree.BytecodeFile, version: int | None = None,
          producer: str | None = None) -> bytes:
  """Serializes `f` at bytecode `version` (default: `f.version`)."""
  version = f.version if version is None else version
  if not 0 <= version <= encoding.MAX_VERSION:
    raise support.InvalidArgumentError(
        f"unsupported bytecode version {version}, must be in "
        f"[0, {encoding.MAX_VERSION}]")
  return _Writer(f, version).write(f.producer if producer is None else producer)


# The per-kind entry functions of the files written since the last codec
# registration (see _Writer.__init__).
_FUNCTIONS: dict = {}
_FUNCTIONS_GENERATION = -1


def compute_isolation(root: tree.Op) -> dict:
  """id(op) -> whether its regions use no value defined outside the op."""
  isolated = {}

  def free_values(op):
    """Values used inside op's regions but defined outside them."""
    used, defined = [], set()
    for region in op.regions:
      for block in region.blocks:
        defined.update(block.args)
        for inner in block.ops:
          used += inner.operands
          defined.update(inner.results)
          if inner.regions:  # an op without regions uses nothing inside
            used += free_values(inner)
    free = defined.issuperset(used) or {v for v in used if v not in defined}
    isolated[id(op)] = free is True
    return () if free is True else free

  if root.regions:
    free_values(root)
  return isolated


class _Writer(codec.EncodeContext):
  """Numbering state and section emission for one file."""

  def __init__(self, f: tree.BytecodeFile, version: int):
    self.f = f
    self.version = version
    self.dialects: dict = {}  # name -> number, first-visit order.
    self.attrs: dict = {}
    self.types: dict = {}
    self.op_names: dict = {}
    self.ordered_attrs: list = []
    self.ordered_types: list = []
    self.ordered_op_names: list = []
    self.value_ids: dict = {}
    self.block_ids: dict = {}
    self.region_counts: dict = {}
    self.next_value_id = 0
    self.strings: dict = {}
    self.properties: list = []
    self.properties_index: dict = {}
    self.resource_numbers: dict = {}
    # id(entry) -> its numbering record; every object keyed here is kept
    # alive (by its record, or in _aliased) while the file is written, so
    # an id found here is that object's.
    self._by_id: dict = {}
    self._aliased: list = []
    # (dialect number, write function) of builtin FileLineColLoc entries
    # once one is numbered, when its codec gives it that one reference
    # (else False).
    self._file_loc = None
    # (class, dialect, kind) -> entry functions, while no codec is
    # registered anew (codec.generation() unchanged).
    global _FUNCTIONS, _FUNCTIONS_GENERATION
    generation = codec.generation()
    if generation != _FUNCTIONS_GENERATION:
      _FUNCTIONS = {}
      _FUNCTIONS_GENERATION = generation
    self._functions: dict = _FUNCTIONS
    self._scratch = encoding.Emitter()  # holds one properties blob at a time
    self.isolated = compute_isolation(f.root)
    self._number_ir(f.root)

  # --- Numbering ---------------------------------------------------------------

  def _dialect(self, name: str) -> int:
    return self.dialects.setdefault(name, len(self.dialects))

  # Entries are keyed by content (equal attributes share a number), but
  # the same object is usually referenced many times: `_by_id` maps an
  # object's id to its numbering record (whose value is that object, which
  # keeps its id its own) so those references skip hashing and comparing
  # the content; an object equal to an entry numbered before (a type
  # converted twice, say) maps to that entry's record, and is kept alive in
  # `_aliased`.

  # _number_attr and _number_type are one routine over the attribute or
  # the type tables, spelled out twice: they run once per reference. The
  # callers count a reference already numbered (by identity) in place and
  # call them for the others.

  def _number_attr(self, attr) -> None:
    dialect = self.dialects.get(attr.dialect)
    if dialect is None:  # (an equal entry would have added it)
      dialect = self._dialect(attr.dialect)
    numbering = [attr, dialect, 1, -1, None]
    known = self.attrs.setdefault(attr, numbering)
    if known is not numbering:  # an equal entry, numbered before
      known[2] += 1
      self._by_id[id(attr)] = known
      self._aliased.append(attr)
      return
    self._by_id[id(attr)] = numbering
    self.ordered_attrs.append(numbering)
    if attr.__class__ in _CODED:
      fns = self._functions.get((attr.__class__, attr.dialect, attr.kind))
      if fns is None:
        fns = self._entry_functions(attr)
      numbering[4] = fns[0]
      if fns[1] is not None:  # (None: no references)
        fns[1](attr.fields, self)

  def _number_type(self, type_) -> None:
    dialect = self.dialects.get(type_.dialect)
    if dialect is None:
      dialect = self._dialect(type_.dialect)
    numbering = [type_, dialect, 1, -1, None]
    known = self.types.setdefault(type_, numbering)
    if known is not numbering:  # an equal entry, numbered before
      known[2] += 1
      self._by_id[id(type_)] = known
      self._aliased.append(type_)
      return
    self._by_id[id(type_)] = numbering
    self.ordered_types.append(numbering)
    if type_.__class__ in _CODED:
      fns = self._functions.get((type_.__class__, type_.dialect, type_.kind))
      if fns is None:
        fns = self._entry_functions(type_)
      numbering[4] = fns[0]
      if fns[1] is not None:  # (None: no references)
        fns[1](type_.fields, self)

  def _entry_functions(self, entry) -> tuple:
    """(write, number_nested) of a codec-encoded entry (`_entry_functions`),
    kept per kind until a codec is registered anew."""
    key = (entry.__class__, entry.dialect, entry.kind)
    fns = self._functions.get(key)
    if fns is None:
      fns = self._functions[key] = _entry_functions(entry)
    return fns

  def _number_op_name(self, name: str) -> None:
    numbering = [name, self._dialect(name.split(".", 1)[0]), 1, -1, None]
    self.op_names[name] = numbering
    self.ordered_op_names.append(numbering)

  def _number_op(self, op: tree.Op) -> None:
    known = self.op_names.get(op.name)
    if known is not None:
      known[2] += 1
    else:
      self._number_op_name(op.name)
    by_id = self._by_id.get
    if op.results:
      value_ids = self.value_ids
      for result in op.results:
        if result not in value_ids:
          value_ids[result] = self.next_value_id
        self.next_value_id += 1
        ty = result.type
        h = by_id(id(ty))
        if h is not None:
          h[2] += 1
        else:
          self._number_type(ty)
    v = op.attrs
    if v is not None:
      h = by_id(id(v))
      if h is not None:
        h[2] += 1
      else:
        self._number_attr(v)
    properties = op.properties
    if properties is not None:
      if self.version < encoding.V_NATIVE_PROPERTIES:
        raise support.InvalidArgumentError(
            f"{op.name} has native properties, which bytecode version "
            f"{self.version} cannot hold (convert them to attributes first)")
      if properties.__class__ is tree.Properties:
        for value in properties.values:
          if value is not None:
            h = by_id(id(value))
            if h is not None:
              h[2] += 1
            else:
              self._number_attr(value)
    v = op.location
    h = by_id(id(v))
    if h is not None:
      h[2] += 1
    elif (v.__class__ is tree.Attr and v.kind == "FileLineColLoc" and
          self._file_loc and v.dialect == "builtin"):
      # Nearly every op has a file location of its own: _number_attr
      # inline, for the kind's one reference (the file name).
      file_loc = self._file_loc
      numbering = [v, file_loc[0], 1, -1, file_loc[1]]
      known = self.attrs.setdefault(v, numbering)
      if known is numbering:
        self._by_id[id(v)] = numbering
        self.ordered_attrs.append(numbering)
        v = v.fields[0]
        if v is not None:
          h = by_id(id(v))
          if h is not None:
            h[2] += 1
          else:
            self._number_attr(v)
      else:  # an equal entry, numbered before
        known[2] += 1
        self._by_id[id(v)] = known
        self._aliased.append(v)
    else:
      self._number_attr(v)
      if (self._file_loc is None and v.__class__ is tree.Attr and
          v.kind == "FileLineColLoc" and v.dialect == "builtin"):
        self._file_loc = _file_loc_numbering(self._by_id[id(v)]) or False

  def _number_region(self, region: tree.Region) -> None:
    if not region.blocks:
      return
    first = self.next_value_id
    for index, block in enumerate(region.blocks):
      self.block_ids[block] = index
      for arg in block.args:
        self.value_ids.setdefault(arg, self.next_value_id)
        self.next_value_id += 1
        loc = arg.loc if arg.loc is not None else builtin_codec.unknown_loc()
        h = self._by_id.get(id(loc))
        if h is not None:
          h[2] += 1
        else:
          self._number_attr(loc)
        h = self._by_id.get(id(arg.type))
        if h is not None:
          h[2] += 1
        else:
          self._number_type(arg.type)
      for op in block.ops:
        self._number_op(op)
    self.region_counts[id(region)] = (len(region.blocks),
                                      self.next_value_id - first)

  def _number_ir(self, root: tree.Op) -> None:
    self._number_op(root)
    stack = []

    def push_regions(op):
      first = 0 if self.isolated.get(id(op)) else self.next_value_id
      for region in op.regions:
        stack.append((region, first))

    push_regions(root)
    while stack:
      region, self.next_value_id = stack.pop()
      self._number_region(region)
      for block in region.blocks:
        for op in block.ops:
          if op.regions:
            push_regions(op)

    for ordered in (self.ordered_attrs, self.ordered_op_names,
                    self.ordered_types):
      ordered.sort(key=_REFS, reverse=True)  # Stable, reverse too.
      _group_by_dialect_per_byte(ordered)

    resource_number = 0
    for group in self.f.resources:
      if group.external:
        continue
      for entry in group.entries:
        self.resource_numbers[tree.ResourceHandle(group.name, entry.key)] = (
            resource_number)
        resource_number += 1

  # --- EncodeContext -------------------------------------------------------------

  def attr_index(self, attr) -> int:
    hit = self._by_id.get(id(attr))
    if hit is not None:
      return hit[3]
    return self.attrs[attr][3]

  def type_index(self, type_) -> int:
    hit = self._by_id.get(id(type_))
    if hit is not None:
      return hit[3]
    return self.types[type_][3]

  def string_index(self, value: str) -> int:
    return self.strings.setdefault(value, len(self.strings))

  def resource_index(self, handle) -> int:
    if handle not in self.resource_numbers:
      raise support.InvalidArgumentError(f"undefined resource {handle}")
    return self.resource_numbers[handle]

  # --- Sections ----------------------------------------------------------------

  def write(self, producer: str) -> bytes:
    out = encoding.Emitter()
    out.raw(encoding.MAGIC)
    out.varint(self.version)
    out.nul_string(producer.encode("utf-8"))
    self._write_dialects(out)
    self._write_attrs_types(out)
    ir = encoding.Emitter()
    ir.varint_with_flag(1, False)
    self._write_op(ir, self.f.root)
    out.section(Section.IR, ir)
    self._write_resources(out)
    strings = encoding.Emitter()
    encoded = [s.encode("utf-8") for s in self.strings]
    strings.varint(len(encoded))
    sbuf = strings.buf
    for s in reversed(encoded):
      x = len(s) + 1
      if x < 0x80:  # most strings
        sbuf.append((x << 1) | 1)
      else:
        strings.varint(x)
    sbuf += b"\0".join(encoded)
    if encoded:
      sbuf.append(0)
    out.section(Section.STRING, strings)
    if self.version >= encoding.V_NATIVE_PROPERTIES:
      props = encoding.Emitter()
      props.varint(len(self.properties))
      pbuf = props.buf
      for blob in self.properties:  # each with its size in front
        x = len(blob)
        if x < 0x80:
          pbuf.append((x << 1) | 1)
        else:
          props.varint(x)
        pbuf += blob
      out.section(Section.PROPERTIES, props)
    return bytes(out.buf)

  def _write_dialects(self, out: encoding.Emitter) -> None:
    e = encoding.Emitter()
    e.varint(len(self.dialects))
    for name in self.dialects:
      name_id = self.string_index(name)
      if self.version < encoding.V_DIALECT_VERSIONING:
        e.varint(name_id)
        continue
      version_bytes = self.f.dialect_versions.get(name, b"")
      e.varint_with_flag(name_id, bool(version_bytes))
      if version_bytes:
        body = encoding.Emitter()
        body.raw(version_bytes)
        e.section(Section.DIALECT_VERSIONS, body)
    if self.version >= encoding.V_ELIDE_UNKNOWN_BLOCK_ARG_LOCATION:
      e.varint(len(self.ordered_op_names))

    def emit_name(numbering):
      string_id = self.string_index(numbering[0].split(".", 1)[1])
      if self.version < encoding.V_NATIVE_PROPERTIES:
        e.varint(string_id)
      else:
        e.varint_with_flag(string_id,
                           numbering[0] not in self.f.unregistered_ops)

    _write_grouped(e, self.ordered_op_names, emit_name)
    out.section(Section.DIALECT, e)

  def _write_attrs_types(self, out: encoding.Emitter) -> None:
    data = encoding.Emitter()
    buf = data.buf
    offsets = encoding.Emitter()
    offsets.varint(len(self.ordered_attrs))
    offsets.varint(len(self.ordered_types))
    obuf = offsets.buf
    previous = 0
    for ordered in (self.ordered_attrs, self.ordered_types):
      dialect = None
      for i, numbering in enumerate(ordered):
        if numbering[1] != dialect:  # a run of one dialect starts
          dialect = numbering[1]
          j = i + 1
          while j < len(ordered) and ordered[j][1] == dialect:
            j += 1
          offsets.varint(dialect)
          offsets.varint(j - i)
        write = numbering[4]
        if write is not None:
          write(numbering[0].fields, buf, data, self)
          custom = 1
        else:
          custom = self._write_entry(data, numbering[0])
        size = len(buf) - previous
        previous += size
        flagged = (size << 1) | custom
        if flagged < 0x80:
          obuf.append((flagged << 1) | 1)
        else:
          offsets.varint(flagged)
    out.section(Section.ATTR_TYPE_OFFSET, offsets)
    out.section(Section.ATTR_TYPE, data)

  def _write_entry(self, e: encoding.Emitter, entry) -> bool:
    if isinstance(entry, (tree.AsmAttr, tree.AsmType)):
      e.nul_string(entry.text)
      return False
    if isinstance(entry, (tree.OpaqueAttr, tree.OpaqueType)):
      e.raw(entry.data)
      return True
    dialect_codec, code, spec = codec.spec_of(entry)
    e.varint(code)
    codec.write_fields(dialect_codec, spec, entry.fields, e, self)
    return True

  def _properties_id(self, op: tree.Op) -> int:
    props = op.properties
    if props.__class__ is tree.RawProperties:
      blob = bytes(props.data)
    else:
      kinds = props.kinds
      write = _PROPERTY_WRITERS.get(kinds)
      if write is None:
        spec = tuple(("", k) for k in kinds)
        write = _PROPERTY_WRITERS[kinds] = _make_entry_writer(None, None, spec)
      e = self._scratch
      buf = e.buf = bytearray()
      write(props.values, buf, e, self)
      blob = bytes(buf)
    # Equal blobs are stored once.
    index = self.properties_index.get(blob)
    if index is None:
      index = self.properties_index[blob] = len(self.properties)
      self.properties.append(blob)
    return index

  def _write_op(self, e: encoding.Emitter, op: tree.Op) -> None:
    # Varints below 0x80 (nearly all here) are appended in place, and
    # references numbered by identity are looked up in place.
    buf = e.buf
    append = buf.append
    by_id = self._by_id.get
    x = self.op_names[op.name][3]
    append((x << 1) | 1) if x < 0x80 else e.varint(x)
    mask_at = len(buf)
    append(0)
    mask = 0
    v = op.location
    h = by_id(id(v))
    x = h[3] if h is not None else self.attrs[v][3]
    append((x << 1) | 1) if x < 0x80 else e.varint(x)
    v = op.attrs
    if v is not None:
      mask |= encoding.HAS_ATTRS
      h = by_id(id(v))
      x = h[3] if h is not None else self.attrs[v][3]
      append((x << 1) | 1) if x < 0x80 else e.varint(x)
    if op.properties is not None:
      mask |= encoding.HAS_PROPERTIES
      x = self._properties_id(op)
      append((x << 1) | 1) if x < 0x80 else e.varint(x)
    results = op.results
    if results:
      mask |= encoding.HAS_RESULTS
      x = len(results)
      append((x << 1) | 1) if x < 0x80 else e.varint(x)
      for result in results:
        v = result.type
        h = by_id(id(v))
        x = h[3] if h is not None else self.types[v][3]
        append((x << 1) | 1) if x < 0x80 else e.varint(x)
    operands = op.operands
    if operands:
      mask |= encoding.HAS_OPERANDS
      x = len(operands)
      append((x << 1) | 1) if x < 0x80 else e.varint(x)
      value_ids = self.value_ids
      for operand in operands:
        x = value_ids.get(operand)
        if x is None:
          raise support.InvalidArgumentError(
              f"{op.name} uses a value that is defined nowhere in the IR")
        append((x << 1) | 1) if x < 0x80 else e.varint(x)
    if op.successors:
      mask |= encoding.HAS_SUCCESSORS
      e.varint(len(op.successors))
      for block in op.successors:
        e.varint(self.block_ids[block])
    if op.use_list_orders and self.version >= encoding.V_USE_LIST_ORDERING:
      mask |= encoding.HAS_USE_LIST_ORDERS
      _write_use_lists(e, op.use_list_orders, len(op.results))
    if op.regions:
      mask |= encoding.HAS_INLINE_REGIONS
    e.buf[mask_at] = mask
    if not op.regions:
      return
    isolated = self.isolated[id(op)]
    e.varint_with_flag(len(op.regions), isolated)
    if isolated and self.version >= encoding.V_LAZY_LOADING:
      body = encoding.Emitter()
      for region in op.regions:
        self._write_region(body, region)
      e.section(Section.IR, body)
    else:
      for region in op.regions:
        self._write_region(e, region)

  def _write_region(self, e: encoding.Emitter, region: tree.Region) -> None:
    if not region.blocks:
      e.varint(0)
      return
    num_blocks, num_values = self.region_counts[id(region)]
    e.varint(num_blocks)
    e.varint(num_values)
    for block in region.blocks:
      self._write_block(e, block)

  def _write_block(self, e: encoding.Emitter, block: tree.Block) -> None:
    e.varint_with_flag(len(block.ops), bool(block.args))
    if block.args:
      e.varint(len(block.args))
      for arg in block.args:
        loc = arg.loc if arg.loc is not None else builtin_codec.unknown_loc()
        type_id = self.type_index(arg.type)
        if self.version >= encoding.V_ELIDE_UNKNOWN_BLOCK_ARG_LOCATION:
          known = not builtin_codec.is_unknown_loc(loc)
          e.varint_with_flag(type_id, known)
          if known:
            e.varint(self.attr_index(loc))
        else:
          e.varint(type_id)
          e.varint(self.attr_index(loc))
      if self.version >= encoding.V_USE_LIST_ORDERING:
        if block.use_list_orders:
          e.byte(encoding.HAS_USE_LIST_ORDERS)
          _write_use_lists(e, block.use_list_orders, len(block.args))
        else:
          e.byte(0)
    for op in block.ops:
      self._write_op(e, op)

  def _write_resources(self, out: encoding.Emitter) -> None:
    # Upstream always emits both sections: the offsets hold at least the
    # count of external resource groups.
    data = encoding.Emitter()
    offsets = encoding.Emitter()
    external = [g for g in self.f.resources if g.external]
    offsets.varint(len(external))

    def emit_group(key: int, group: tree.ResourceGroup):
      sizes = []
      for entry in group.entries:
        start = len(data)
        if entry.value is not None:
          if entry.kind == "blob":
            data.varint(entry.alignment)
            data.varint(len(entry.value))
            data.align_to(entry.alignment)
            data.raw(entry.value)
          elif entry.kind == "bool":
            data.byte(int(entry.value))
          else:
            data.varint(self.string_index(entry.value))
        sizes.append(len(data) - start)
      offsets.varint(key)
      offsets.varint(len(group.entries))
      for entry, size in zip(group.entries, sizes):
        offsets.varint(self.string_index(entry.key))
        offsets.varint(size)
        offsets.byte(_RESOURCE_KIND_CODES[entry.kind])

    for group in external:
      emit_group(self.string_index(group.name), group)
    for group in self.f.resources:
      if not group.external and group.entries:
        if group.name not in self.dialects:
          raise support.InvalidArgumentError(
              f"resources of dialect {group.name}, which the IR never uses")
        emit_group(self.dialects[group.name], group)
    out.section(Section.RESOURCE_OFFSET, offsets)
    out.section(Section.RESOURCE, data)


def _file_loc_numbering(numbering: list):
  """(dialect number, write function) of the FileLineColLoc entry of
  `numbering` when the codec's only reference in it is the file name
  (field 0, an attribute), else None."""
  spec = codec.spec_of(numbering[0])
  if (numbering[4] is None or spec is None or
      codec.ref_fields(spec[2]) != ((0, "attr"),)):
    return None
  return numbering[1], numbering[4]


def _group_by_dialect_per_byte(ordered: list) -> None:
  """IRNumbering's groupByDialectPerByte: sort by dialect per varint band."""
  if len(ordered) <= 0x80:
    # One band (the first: one-byte numbers), whose first dialect is 0,
    # so the order is a stable sort by dialect.
    ordered.sort(key=_DIALECT)
    for number, numbering in enumerate(ordered):
      numbering[3] = number
    return
  first_dialect = 0
  in_group = 0
  start = 0
  for width in range(1, 9):
    in_group = (1 << (7 * width)) - in_group
    band = ordered[start:start + in_group]
    # A stable sort by (dialect != first_dialect, dialect).
    rest = [n for n in band if n[1] != first_dialect]
    if rest:
      rest.sort(key=_DIALECT)
      band = [n for n in band if n[1] == first_dialect] + rest
      ordered[start:start + len(band)] = band
    first_dialect = band[-1][1]
    start += len(band)
    if start >= len(ordered):
      break
  for number, numbering in enumerate(ordered):
    numbering[3] = number


# --- Entry encoders ------------------------------------------------------------
#
# An attribute / type entry is written as its kind code then its fields, by
# the field spec of its codec. Rather than interpreting the spec for every
# entry (a call per field and per varint), each spec gets a function made
# once from its source text, which writes the code and the fields with
# one-byte varints appended in place; references are looked up in the
# writer's identity table as `attr_index` / `type_index` do. Field kinds
# other than references, varints and strings go through codec.write_field
# as before.

# (entry class, dialect, kind) -> (the dialect's codec, (writer, numberer))
_ENTRY_FUNCTIONS: dict = {}


def _entry_functions(entry):
  """(write function, numbering function) of an Attr / Type, made for the
  codec registered for its dialect now (as codec.spec_of checks)."""
  key = (entry.__class__, entry.dialect, entry.kind)
  hit = _ENTRY_FUNCTIONS.get(key)
  if hit is not None and codec.lookup(entry.dialect) is hit[0]:
    return hit[1]
  spec = codec.spec_of(entry)
  if spec is None:
    raise support.InvalidArgumentError(
        f"no bytecode codec for {entry.dialect}.{entry.kind}")
  fns = (_make_entry_writer(*spec), _make_entry_numberer(spec[2]))
  _ENTRY_FUNCTIONS[key] = (spec[0], fns)
  return fns


def _make_entry_numberer(spec):
  """The function numbering the entries an entry of `spec` refers to, in
  codec.nested_refs order (None when there are none); a reference already
  numbered by identity only counts the use, without a call."""
  lines = ["def number_nested(values, w):"]

  def ref(indent, v, method):
    return [f"{indent}h = by_id(id({v}))",
            f"{indent}if h is not None:",
            f"{indent}  h[2] += 1",
            f"{indent}else:",
            f"{indent}  w.{method}({v})"]

  for i, kind in codec.ref_fields(spec):
    v = f"values[{i}]"
    if kind == "attr" or kind == "opt_attr" or kind == "flag_attr":
      lines += [f"  v = {v}", "  if v is not None:"]
      lines += ref("    ", "v", "_number_attr")
    elif kind == "type":
      lines += [f"  v = {v}"] + ref("  ", "v", "_number_type")
    elif kind == "attrs" or kind == "types":
      method = "_number_attr" if kind == "attrs" else "_number_type"
      lines += [f"  for v in {v}:"] + ref("    ", "v", method)
    elif kind == "attr_pairs":
      lines += [f"  for a, b in {v}:"]
      lines += ref("    ", "a", "_number_attr") + ref("    ", "b",
                                                       "_number_attr")
    else:  # resource
      lines.append(f"  w._dialect({v}.dialect)")
  if len(lines) == 1:
    return None  # an entry without references: nothing to number
  lines.insert(1, "  by_id = w._by_id.get")
  scope = {}
  exec("\n".join(lines), scope)  # pylint: disable=exec-used
  return scope["number_nested"]


def _make_entry_writer(dialect_codec, code, spec):
  """The function writing `code` (unless None) and fields of `spec`;
  `dialect_codec` None for the fields of an op's properties."""
  dialect = "properties" if dialect_codec is None else dialect_codec.dialect
  lines = ["def write_entry(values, buf, e, w):",
           f"  if len(values) != {len(spec)}:",
           f"    raise support.InvalidArgumentError("
           f"{dialect + ': expected %d fields' % len(spec)!r}"
           " + f', got {len(values)}')"]
  if code is None:
    pass
  elif code < 0x80:
    lines.append(f"  buf.append({(code << 1) | 1})")
  else:
    lines.append(f"  e.varint({code})")
  needs = set()
  for i, (_, kind) in enumerate(spec):
    v = f"values[{i}]"
    if kind == "attr" or kind == "type":
      table = "w.attrs" if kind == "attr" else "w.types"
      needs.add("by_id")
      lines += [f"  v = {v}",
                "  h = by_id(id(v))",
                f"  x = h[3] if h is not None else {table}[v][3]"]
    elif kind == "opt_attr":
      needs.add("by_id")
      lines += [f"  v = {v}",
                "  if v is None:",
                "    x = 0",
                "  else:",
                "    h = by_id(id(v))",
                "    x = ((h[3] if h is not None else w.attrs[v][3]) << 1) | 1"]
    elif kind == "varint":
      lines.append(f"  x = {v}")
    elif kind == "string":
      lines += [f"  x = w.string_index({v})"]
    elif kind in ("attrs", "types", "svarints", "blob"):
      # A count (a size for a blob), then the elements (the bytes).
      lines += [f"  vs = {v}",
                "  x = len(vs)",
                "  if x < 0x80:",
                "    buf.append((x << 1) | 1)",
                "  else:",
                "    e.varint(x)"]
      if kind == "blob":
        lines.append("  buf += vs")
        continue
      lines.append("  for v in vs:")
      if kind == "svarints":
        lines.append("    x = zigzag(v)")
      else:
        table = "w.attrs" if kind == "attrs" else "w.types"
        needs.add("by_id")
        lines += ["    h = by_id(id(v))",
                  f"    x = h[3] if h is not None else {table}[v][3]"]
      lines += ["    if 0 <= x < 0x80:",
                "      buf.append((x << 1) | 1)",
                "    else:",
                "      e.varint(x)"]
      continue
    else:
      lines.append(f"  write_field(dialect_codec, {kind!r}, {v}, e, w, "
                   f"list(values[:{i}]))")
      continue
    lines += ["  if 0 <= x < 0x80:",
              "    buf.append((x << 1) | 1)",
              "  else:",
              "    e.varint(x)"]
  if "by_id" in needs:
    lines.insert(1, "  by_id = w._by_id.get")
  scope = {"support": support, "dialect_codec": dialect_codec,
           "write_field": codec.write_field,
           "zigzag": encoding.zigzag_encode}
  exec("\n".join(lines), scope)  # pylint: disable=exec-used
  return scope["write_entry"]


def _write_grouped(e: encoding.Emitter, ordered: list, emit_entry) -> None:
  """Emits entries in runs of one dialect: dialect, count, entries."""
  i = 0
  while i < len(ordered):
    j = i + 1
    while j < len(ordered) and ordered[j][1] == ordered[i][1]:
      j += 1
    e.varint(ordered[i][1])
    e.varint(j - i)
    for numbering in ordered[i:j]:
      emit_entry(numbering)
    i = j


def _write_use_lists(e: encoding.Emitter, orders: list, num_values: int):
  if num_values != 1:
    e.varint(len(orders))
  for index, pairs, items in orders:
    if num_values != 1:
      e.varint(index)
    e.varint_with_flag(len(items), pairs)
    for item in items:
      e.varint(item)
