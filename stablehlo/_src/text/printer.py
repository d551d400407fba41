"""IR -> MLIR text, in the pretty form upstream StableHLO prints (default) or
MLIR's generic form (`generic=True`)."""

from __future__ import annotations

import re

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_printer
from stablehlo._src.text import parser as parser_lib

format_type = attr_printer.format_type
format_attr = attr_printer.format_attr

_NAME_RE = re.compile(r"[A-Za-z_$.\-][A-Za-z0-9_$.\-]*")
# Ops whose regions start a fresh value numbering (IsolatedFromAbove).
_ISOLATED = frozenset(("builtin.module", "func.func", "vhlo.func_v1"))
INDENT = "  "


class _Names:
  """SSA names of one scope; child scopes see (and never shadow) parents'."""

  def __init__(self, parent=None):
    self.parent = parent
    self.used = set()
    self.next_value = parent.next_value if parent else 0
    self.next_arg = parent.next_arg if parent else 0

  def is_used(self, name) -> bool:
    s = self
    while s is not None:
      if name in s.used:
        return True
      s = s.parent
    return False

  def claim(self, hint) -> str:
    if hint and _NAME_RE.fullmatch(hint) and not hint[0].isdigit():
      name = hint
      k = 0
      while self.is_used(name):
        name = f"{hint}_{k}"
        k += 1
      self.used.add(name)
      return name
    return None

  def number(self) -> str:
    while True:
      name = str(self.next_value)
      self.next_value += 1
      if not self.is_used(name):
        self.used.add(name)
        return name

  def arg(self) -> str:
    while True:
      name = f"arg{self.next_arg}"
      self.next_arg += 1
      if not self.is_used(name):
        self.used.add(name)
        return name


class Printer:
  """Prints one module. Pretty forms call back into the `v`/`t`/`a`/... API."""

  def __init__(self, generic: bool = False, print_locations: bool = False):
    self.generic = generic
    self.print_locations = print_locations
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
        if k not in elide:
          entries.append((k, val))
    if not entries:
      return ""
    return attr_printer.format_dict(entries) + " "

  def loc_suffix(self, loc) -> str:
    if loc is None:
      return ""
    return f" loc({loc.text if loc.text is not None else 'unknown'})"

  def region(self, region: core.Region, entry_args: bool = True) -> str:
    lines = ["{"]
    self.level += 1
    for i, block in enumerate(region.blocks):
      print_label = i > 0 or (entry_args and block.arguments)
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
          sep = "" if not body or body[0] == "(" else " "
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
    return parser_lib.DEFAULT_DIALECT.get(parent.name, "")

  def _results(self, op) -> str:
    if not op.results:
      return ""
    names = [self.names.get(id(r), "?") for r in op.results]
    if len(names) == 1:
      return f"%{names[0]} = "
    if "#" in names[0]:
      return f"%{names[0].split('#')[0]}:{len(names)} = "
    return ", ".join("%" + n for n in names) + " = "

  def _generic(self, op) -> str:
    from stablehlo._src.text import lexer as lx  # pylint: disable=g-import-not-at-top
    s = f'"{lx.escape_string(op.name)}"({self.vs(op.operands)})'
    if op.successors:
      s += "[" + ", ".join("^" + self.block_names.get(id(b), "bb?")
                           for b in op.successors) + "]"
    if op.properties:
      s += " <" + attr_printer.format_dict(list(op.properties.items())) + ">"
    if op.regions:
      s += " (" + ", ".join(self.region(r, entry_args=True)
                            for r in op.regions) + ")"
    if op.attributes:
      s += " " + attr_printer.format_dict(list(op.attributes.items()))
    return s + " : " + self.fn_type(op.operand_types, op.result_types)

  # --- naming ----------------------------------------------------------------------------

  def assign_names(self, op: core.Operation, names: _Names) -> None:
    """Names `op`'s results, then everything nested (MLIR's order: a
    region's own values first, nested regions after; siblings reuse)."""
    self._name_results(op, names)
    self._name_regions(op, names)

  def _name_regions(self, op: core.Operation, names: _Names) -> None:
    isolated = op.name in _ISOLATED
    shared = op.name in self._shared and not self.generic
    first_args = None
    for ri, region in enumerate(op.regions):
      scope = _Names(None if isolated else names)
      for bi, block in enumerate(region.blocks):
        self.block_names[id(block)] = f"bb{bi}"
        for ai, v in enumerate(block.arguments):
          if (shared and ri > 0 and bi == 0 and first_args is not None and
              ai < len(first_args)):
            self.names[id(v)] = first_args[ai]
            scope.used.add(first_args[ai])
            continue
          self.names[id(v)] = scope.claim(v.name_hint) or scope.arg()
        if ri == 0 and bi == 0:
          first_args = [self.names[id(v)] for v in block.arguments]
      for block in region.blocks:
        for inner in block.operations:
          self._name_results(inner, scope)
      for block in region.blocks:
        for inner in block.operations:
          if inner.regions:
            self._name_regions(inner, scope)

  def _name_results(self, op, names: _Names) -> None:
    results = op.results
    if not results:
      return
    hints = [r.name_hint for r in results]
    if len(results) > 1 and len(set(hints)) == len(hints) and all(
        h and _NAME_RE.fullmatch(h) and not h[0].isdigit() for h in hints):
      for r in results:
        self.names[id(r)] = names.claim(r.name_hint)
      return
    base = names.claim(hints[0]) or names.number()
    if len(results) == 1:
      self.names[id(results[0])] = base
    else:
      for i, r in enumerate(results):
        self.names[id(r)] = f"{base}#{i}"

  def print_module(self, module: core.Module) -> str:
    from stablehlo._src.text import pretty_ops  # pylint: disable=g-import-not-at-top
    from stablehlo._src.text import pretty_region_ops  # pylint: disable=g-import-not-at-top
    self._forms = pretty_ops.PRETTY_FORMS
    self._shared = pretty_region_ops.SHARED_ARG_NAMES
    self.assign_names(module.op, _Names())
    out = self.op(module.op) + "\n"
    if self.print_locations:
      for name, loc in module.location_aliases.items():
        out += f"#{name} = loc({loc.text})\n"
    if module.resources:
      out += _format_resources(module.resources)
    return out


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
                 print_locations: bool = False) -> str:
  return Printer(generic, print_locations).print_module(module)
