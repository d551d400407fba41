"""IR -> MLIR text, in the pretty form upstream StableHLO prints (default) or
MLIR's generic form (`generic=True`)."""

from __future__ import annotations

from stablehlo._src.ir import core
from stablehlo._src.text import attr_printer
from stablehlo._src.text import op_defaults
from stablehlo._src.text import ssa_names

format_type = attr_printer.format_type
format_attr = attr_printer.format_attr

INDENT = "  "


class Printer:
  """Prints one module. Pretty forms call back into the `v`/`t`/`a`/... API."""

  def __init__(self, generic: bool = False, print_locations: bool = False,
               keep_source_names: bool = False):
    self.generic = generic
    self.print_locations = print_locations
    self.keep_source_names = keep_source_names
    self.names: dict[int, str] = {}
    self.block_names: dict[int, str] = {}
    self.level = 0
    self._forms = None
    self._shared = frozenset()

  # --- API for pretty forms ------------------------------------------------------

  def v(self, value: core.Value) -> str:
    return "%" + self.names.get(id(value), "<<UNKNOWN SSA VALUE>>")

  def vs(self, values) -> str:
    return ", ".join(self.v(x) for x in values)

  def t(self, ty) -> str:
    return format_type(ty)

  def ts(self, types) -> str:
    return ", ".join(format_type(x) for x in types)

  def a(self, attr) -> str:
    return format_attr(attr)

  def fn_type(self, inputs, results) -> str:
    return attr_printer.format_function_type(list(inputs), list(results))

  def symbol(self, name: str) -> str:
    return attr_printer.format_symbol(name)

  def string(self, value: str) -> str:
    return attr_printer.format_string(value)

  def float_value(self, value, ty) -> str:
    return attr_printer.format_float(value, ty)

  def indent_str(self) -> str:
    return INDENT * self.level

  def attr_dict(self, op, elide=frozenset(), extra=None) -> str:
    """`{...} ` (trailing space) of the op's attributes not in `elide`."""
    entries = []
    if extra:
      entries.extend(extra.items())
    for d in (op.properties, op.attributes):
      for k, val in d.items():
        if k not in elide and not op_defaults.is_default_attr(op.name, k, val):
          entries.append((k, val))
    if not entries:
      return ""
    return attr_printer.format_dict(entries) + " "

  def loc_suffix(self, loc) -> str:
    if loc is None:
      return ""
    return f" loc({loc.text if loc.text is not None else 'unknown'})"

  def region(self, region: core.Region, entry_args: bool = True,
             empty_block_label: bool = False) -> str:
    """`{ ... }`. `empty_block_label`: an empty entry block still prints its
    `^bb0:` label (MLIR's generic form does this)."""
    lines = ["{"]
    self.level += 1
    for i, block in enumerate(region.blocks):
      print_label = i > 0 or (entry_args and (
          block.arguments or (empty_block_label and not block.operations)))
      if print_label:
        lines.append(INDENT * (self.level - 1) + self._block_header(block))
      for op in block.operations:
        lines.append(self.indent_str() + self.op(op))
    self.level -= 1
    lines.append(self.indent_str() + "}")
    if len(lines) == 2 and not region.blocks:
      return "{\n" + self.indent_str() + "}"
    return "\n".join(lines)

  def _block_header(self, block: core.Block) -> str:
    label = "^" + self.block_names.get(id(block), "bb?")
    if not block.arguments:
      return label + ":"
    args = []
    for v, loc in zip(block.arguments, block.argument_locations):
      s = f"{self.v(v)}: {self.t(v.type)}"
      if self.print_locations:
        s += self.loc_suffix(loc)
      args.append(s)
    return f"{label}({', '.join(args)}):"

  # --- ops ------------------------------------------------------------------------------

  def op(self, op: core.Operation) -> str:
    text = self._results(op)
    body = None
    if not self.generic:
      form = self._forms.get(op.name)
      if form is not None and not op.successors and (
          form.has_regions or not op.regions):
        body = form.print(self, op)
        if body is not None:
          name = op.name
          dd = self._default_dialect(op)
          if dd and name.startswith(dd + ".") and "." not in name[len(dd) + 1:]:
            name = name[len(dd) + 1:]
          if name.startswith("builtin."):
            name = name[len("builtin."):]
          # As ODS-generated printers, no space before a leading `(` or `<`.
          sep = "" if not body or body[0] in "(<" else " "
          text += name + sep + body
    if body is None:
      text += self._generic(op)
    if self.print_locations and op.location is not None:
      text += self.loc_suffix(op.location)
    return text

  def _default_dialect(self, op) -> str:
    block = op.parent
    region = block.parent if block is not None else None
    parent = region.parent if region is not None else None
    if parent is None:
      return ""
    return op_defaults.DEFAULT_DIALECT.get(parent.name, "")

  def _results(self, op) -> str:
    """`%0 = `, `%0:2 = `, `%a, %b:2 = ` (one entry per result group)."""
    if not op.results:
      return ""
    groups = []  # [base, count]
    for r in op.results:
      name = self.names.get(id(r), "?")
      base, sep, _ = name.partition("#")
      if sep and groups and groups[-1][0] == base and groups[-1][2]:
        groups[-1][1] += 1
      else:
        groups.append([base, 1, bool(sep)])
    return ", ".join(f"%{b}:{n}" if hashed else f"%{b}"
                     for b, n, hashed in groups) + " = "

  def _generic(self, op) -> str:
    from stablehlo._src.text import lexer as lx  # pylint: disable=g-import-not-at-top
    s = f'"{lx.escape_string(op.name)}"({self.vs(op.operands)})'
    if op.successors:
      s += "[" + ", ".join("^" + self.block_names.get(id(b), "bb?")
                           for b in op.successors) + "]"
    props, attrs = _split_inherent(op)
    if props:
      s += " <" + attr_printer.format_dict(props) + ">"
    if op.regions:
      s += " (" + ", ".join(self.region(r, entry_args=True,
                                        empty_block_label=True)
                            for r in op.regions) + ")"
    if attrs:
      s += " " + attr_printer.format_dict(attrs)
    return s + " : " + self.fn_type(op.operand_types, op.result_types)

  def print_module(self, module: core.Module) -> str:
    from stablehlo._src.text import pretty_ops  # pylint: disable=g-import-not-at-top
    from stablehlo._src.text import pretty_region_ops  # pylint: disable=g-import-not-at-top
    self._forms = pretty_ops.PRETTY_FORMS
    self._shared = pretty_region_ops.SHARED_ARG_NAMES
    state = ssa_names.NameState(self.generic, self.keep_source_names)
    state.run(module.op, self._shared)
    self.names, self.block_names = state.values, state.blocks
    with attr_printer.collecting_aliases() as aliases:
      out = self.op(module.op) + "\n"
    out = "".join(f"#{name} = {text}\n" for name, text in aliases) + out
    if self.print_locations:
      for name, loc in module.location_aliases.items():
        out += f"#{name} = loc({loc.text})\n"
    if module.resources:
      out += _format_resources(module.resources)
    return out


def _inherent_names(op_name: str) -> frozenset:
  """The op's own (ODS) attribute names; MLIR keeps them as properties."""
  names = _INHERENT_CACHE.get(op_name)
  if names is None:
    from stablehlo._src.ops import registry  # pylint: disable=g-import-not-at-top
    opdef = registry.lookup(op_name)
    names = frozenset(k.rstrip("?") for k in opdef.attributes) if (
        opdef is not None and opdef.attributes) else frozenset()
    names |= op_defaults.defaulted_names(op_name)
    _INHERENT_CACHE[op_name] = names
  return names


_INHERENT_CACHE: dict[str, frozenset] = {}


def _split_inherent(op) -> tuple[list, list]:
  """(properties, discardable attributes) as the generic form prints them:
  a registered op's inherent attributes print in `<{...}>` even when the
  source gave them in the trailing `{...}`."""
  props = list(op.properties.items())
  attrs = list(op.attributes.items())
  inherent = _inherent_names(op.name)
  if inherent and attrs:
    props += [(k, v) for k, v in attrs if k in inherent]
    attrs = [(k, v) for k, v in attrs if k not in inherent]
  return props, attrs


def _format_resources(resources) -> str:
  sections = []
  for section, groups in resources.items():
    gs = []
    for dialect, entries in groups.items():
      es = ",\n".join(f"      {k}: {v}" for k, v in entries.items())
      gs.append(f"    {dialect}: {{\n{es}\n    }}")
    sections.append(f"  {section}: {{\n" + ",\n".join(gs) + "\n  }")
  return "\n{-#\n" + ",\n".join(sections) + "\n#-}\n"


def print_module(module: core.Module, generic: bool = False,
                 print_locations: bool = False,
                 keep_source_names: bool = False) -> str:
  """The module's text. Values are named as upstream MLIR names them
  (`%0`, `%arg0`, `%cst_1`, `%iterArg`); `keep_source_names=True` keeps the
  names the module was parsed with where they are valid and unique."""
  return Printer(generic, print_locations,
                 keep_source_names).print_module(module)
