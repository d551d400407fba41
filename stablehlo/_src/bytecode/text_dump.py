"""Prints the generic tree in MLIR's generic operation syntax.

For debugging and for tests: two trees print the same text exactly when they
hold the same IR (every attribute field is printed, blobs in hex). Op
properties print positionally (`<{0 = ..., 1 = ...}>`) because the tree does
not know attribute names. VHLO types print as upstream spells them
(`!vhlo.tensor_v1<2x!vhlo.f32_v1>`); other entries use a generic
`#dialect.Kind<fields>` spelling.
"""

from __future__ import annotations

from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import vhlo_codec

_VHLO_TYPE_NAMES = {kind: name for kind, (name, _) in
                    vhlo_codec.ELEMENT_TYPES.items()}
_VHLO_TYPE_NAMES.update({"BooleanV1Type": "bool", "TokenV1Type": "token",
                         "NoneV1Type": "none", "WitnessV1Type": "witness"})


def dump(f: tree.BytecodeFile | tree.Op) -> str:
  """The whole file (or one op) in generic syntax, one op per line."""
  root = f.root if isinstance(f, tree.BytecodeFile) else f
  printer = _Printer()
  printer.assign(root)
  printer.op(root, 0)
  return "\n".join(printer.lines) + "\n"


def type_str(t) -> str:
  if isinstance(t, tree.Type):
    if t.dialect == "vhlo":
      return _vhlo_type(t)
    if t.dialect == "builtin":
      return _builtin_type(t)
    return f"!{t.dialect}.{t.kind}<{_fields(t.fields)}>"
  if isinstance(t, tree.AsmType):
    return t.text.decode("utf-8", "replace")
  if isinstance(t, tree.OpaqueType):
    return f"!{t.dialect}.opaque<{t.data.hex()}>"
  return "<<unknown type>>"


def _shape(shape) -> str:
  return "".join(("?" if d < 0 else str(d)) + "x" for d in shape)


def _vhlo_type(t: tree.Type) -> str:
  k, f = t.kind, t.fields
  if k in _VHLO_TYPE_NAMES:
    return f"!vhlo.{_VHLO_TYPE_NAMES[k]}_v1"
  if k == "RankedTensorV1Type":
    return f"!vhlo.tensor_v1<{_shape(f[0])}{type_str(f[1])}>"
  if k == "RankedTensorV1TypeWithEncoding":
    return (f"!vhlo.tensor_v1<{_shape(f[1])}{type_str(f[2])}, "
            f"{attr_str(f[0])}>")
  if k == "UnrankedTensorV1Type":
    return f"!vhlo.unranked_tensor_v1<*x{type_str(f[0])}>"
  if k == "RankedBufferV1Type":
    return f"!vhlo.buffer_v1<{_shape(f[0])}{type_str(f[1])}>"
  if k == "ComplexV1Type":
    return f"!vhlo.complex_v1<{type_str(f[0])}>"
  if k in ("TupleV1Type", "FutureV1Type"):
    name = "tuple" if k == "TupleV1Type" else "future"
    return f"!vhlo.{name}_v1<{', '.join(type_str(x) for x in f[0])}>"
  if k == "FunctionV1Type":
    return (f"!vhlo.func_v1<({', '.join(type_str(x) for x in f[0])}) -> "
            f"{_result_list(f[1])}>")
  return f"!vhlo.{k}<{_fields(f)}>"


def _builtin_type(t: tree.Type) -> str:
  k, f = t.kind, t.fields
  if k == "IntegerType":
    sign = {0: "i", 1: "si", 2: "ui"}.get(f[0] & 3, "?")
    return f"{sign}{f[0] >> 2}"
  simple = {"IndexType": "index", "BFloat16Type": "bf16", "Float16Type": "f16",
            "Float32Type": "f32", "Float64Type": "f64", "Float80Type": "f80",
            "Float128Type": "f128", "NoneType": "none"}
  if k in simple:
    return simple[k]
  if k == "FunctionType":
    return f"({', '.join(type_str(x) for x in f[0])}) -> {_result_list(f[1])}"
  if k == "RankedTensorType":
    return f"tensor<{_shape(f[0])}{type_str(f[1])}>"
  if k == "ComplexType":
    return f"complex<{type_str(f[0])}>"
  if k == "TupleType":
    return f"tuple<{', '.join(type_str(x) for x in f[0])}>"
  return f"!builtin.{k}<{_fields(f)}>"


def _result_list(types) -> str:
  if len(types) == 1 and not (isinstance(types[0], tree.Type) and
                              types[0].kind in ("FunctionType",
                                                "FunctionV1Type")):
    return type_str(types[0])
  return f"({', '.join(type_str(x) for x in types)})"


def _fields(fields) -> str:
  return ", ".join(_field(x) for x in fields)


def _field(x) -> str:
  if isinstance(x, (tree.Attr, tree.AsmAttr, tree.OpaqueAttr)):
    return attr_str(x)
  if isinstance(x, (tree.Type, tree.AsmType, tree.OpaqueType)):
    return type_str(x)
  if isinstance(x, bytes):
    return f'"0x{x.hex().upper()}"'
  if isinstance(x, str):
    return _quote(x)
  if isinstance(x, tuple):
    return f"[{_fields(x)}]"
  if x is None:
    return "<none>"
  return str(x)


def _quote(s: str) -> str:
  out = []
  for ch in s:
    if ch in '"\\' or not 32 <= ord(ch) < 127:
      out.extend(f"\\{b:02X}" for b in ch.encode("utf-8"))
    else:
      out.append(ch)
  return '"' + "".join(out) + '"'


def attr_str(a) -> str:
  if isinstance(a, tree.AsmAttr):
    return a.text.decode("utf-8", "replace")
  if isinstance(a, tree.OpaqueAttr):
    return f"#{a.dialect}.opaque<{a.data.hex()}>"
  if not isinstance(a, tree.Attr):
    return "<<unknown attr>>"
  k, f = a.kind, a.fields
  if a.dialect == "builtin":
    if k == "StringAttr":
      return _quote(f[0])
    if k == "DictionaryAttr":
      return "{" + ", ".join(f"{_name(n)} = {attr_str(v)}" for n, v in f[0]) + "}"
    if k == "ArrayAttr":
      return f"[{_fields(f[0])}]"
    if k == "UnknownLoc":
      return "loc(unknown)"
    if k == "FileLineColLoc":
      return f"loc({attr_str(f[0])}:{f[1]}:{f[2]})"
    if k == "NameLoc":
      return f"loc({attr_str(f[0])}({attr_str(f[1])}))"
    if k == "UnitAttr":
      return "unit"
  if a.dialect == "vhlo":
    if vhlo_codec.is_enum(a):
      name = vhlo_codec.ENUM_NAMES[k].get(f[0], f"<{f[0]}>")
      return f"#vhlo.{k}<{name}>"
    if k == "StringV1Attr":
      return f"#vhlo.string_v1<{_quote(f[0])}>"
    if k == "BooleanV1Attr":
      return f"#vhlo.bool_v1<{'true' if f[0] else 'false'}>"
    if k == "IntegerV1Attr":
      return f"#vhlo.integer_v1<{f[1]} : {type_str(f[0])}>"
    if k == "FloatV1Attr":
      return f"#vhlo.float_v1<0x{f[1]:X} : {type_str(f[0])}>"
    if k == "ArrayV1Attr":
      return f"#vhlo.array_v1<[{_fields(f[0])}]>"
    if k == "TypeV1Attr":
      return f"#vhlo.type_v1<{type_str(f[0])}>"
    if k == "TensorV1Attr":
      return f"#vhlo.tensor_v1<dense<\"0x{f[1].hex().upper()}\"> : {type_str(f[0])}>"
    if k == "DictionaryV1Attr":
      return ("#vhlo.dict_v1<{" +
              ", ".join(f"{attr_str(n)} = {attr_str(v)}" for n, v in f[0]) +
              "}>")
  return f"#{a.dialect}.{k}<{_fields(f)}>"


def _name(name_attr) -> str:
  text = name_attr.fields[0] if isinstance(name_attr, tree.Attr) else "?"
  return text if text.replace("_", "a").replace(".", "a").isalnum() else _quote(text)


class _Printer:

  def __init__(self):
    self.lines = []
    self.names = {}
    self.next_result = 0
    self.next_arg = 0
    self.block_names = {}

  def value(self, v: tree.Value) -> str:
    return self.names.get(v, f"%<undefined {v.id}>")

  def assign(self, op: tree.Op) -> None:
    """Names every value first, so forward references print too."""
    for r in op.results:
      self.names[r] = f"%{self.next_result}"
      self.next_result += 1
    for region in op.regions:
      for i, block in enumerate(region.blocks):
        self.block_names[block] = f"^bb{i}"
        for arg in block.args:
          self.names[arg] = f"%arg{self.next_arg}"
          self.next_arg += 1
        for inner in block.ops:
          self.assign(inner)

  def op(self, op: tree.Op, indent: int) -> None:
    pad = "  " * indent
    results = [self.value(r) for r in op.results]
    text = pad + (", ".join(results) + " = " if results else "")
    text += f'"{op.name}"({", ".join(self.value(v) for v in op.operands)})'
    if op.successors:
      text += "[" + ", ".join(self.block_names.get(b, "^?")
                              for b in op.successors) + "]"
    if isinstance(op.properties, tree.Properties):
      text += " <{" + ", ".join(
          f"{i} = {attr_str(v) if v is not None else '<none>'}"
          for i, v in enumerate(op.properties.values)) + "}>"
    elif isinstance(op.properties, tree.RawProperties):
      text += f" <{{raw = \"0x{op.properties.data.hex().upper()}\"}}>"
    if op.regions:
      self.lines.append(text + " (")
      for i, region in enumerate(op.regions):
        self.region(region, indent + 1)
        if i + 1 < len(op.regions):
          self.lines.append(pad + "}, {")
      text = pad + ")"
    if op.attrs is not None:
      text += " " + attr_str(op.attrs)
    operand_types = ", ".join(type_str(v.type) for v in op.operands)
    text += f" : ({operand_types}) -> {_result_list(op.result_types)}"
    text += f" {attr_str(op.location)}"
    self.lines.append(text)

  def region(self, region: tree.Region, indent: int) -> None:
    pad = "  " * (indent - 1)
    self.lines.append(pad + "{")
    for i, block in enumerate(region.blocks):
      args = []
      for arg in block.args:
        args.append(f"{self.value(arg)}: {type_str(arg.type)} "
                    f"{attr_str(arg.loc) if arg.loc is not None else ''}")
      if args or i:
        self.lines.append(pad + f"^bb{i}({', '.join(args)}):")
      for op in block.ops:
        self.op(op, indent)
    self.lines.append(pad + "}")
