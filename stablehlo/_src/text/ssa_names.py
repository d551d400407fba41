"""SSA value and block names, chosen the way MLIR's AsmPrinter chooses them.

Upstream ignores the names a program was written with. It walks the IR once
before printing (`SSANameState`):

* A region's values are named before any region nested in it: block by block,
  first the block's arguments, then the results of its ops. Nested regions are
  then taken from a stack (last pushed, first named).
* Entry-block arguments are `%argN`, other block arguments and unnamed results
  take the next number `%N`; an op with several results gets one number and
  prints `%N:k` / uses `%N#i`.
* Ops may suggest names (OpAsmOpInterface): `stablehlo.constant` results are
  `%c` (integer element type) or `%cst`; `stablehlo.while` region arguments
  are `%iterArg`; ops with several named ODS results use those names
  (`%output_state, %output = stablehlo.rng_bit_generator ...`);
  `arith.constant` gives `%c42_i32`, `%c0` (index), `%true`, `%cst`.
  Suggested names are made unique with `_K`, K from one counter.
* In the pretty form each region starts from the counters (next value number,
  next argument number, next conflict suffix) its parent region had after it
  was fully named, and may reuse names of sibling regions. The generic form
  prints unique ids: the counters simply run on across the whole walk.

`NameState(keep_source_names=True)` instead keeps the source's names where they
are valid and unique (the behaviour before this module), numbering the rest.
"""

from __future__ import annotations

import re
from typing import Optional

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_printer

_NAME_RE = re.compile(r"[A-Za-z_$.\-][A-Za-z0-9_$.\-]*")
_BAD_NAME_CHAR = re.compile(r"[^A-Za-z0-9_$.\-]")

# Regions whose values the source names cannot leak out of (only used when
# keeping source names).
_ISOLATED = frozenset(("builtin.module", "func.func", "vhlo.func_v1",
                       "sdy.manual_computation", "sdy.named_computation"))

def _scan_arg_name(op, i: int) -> str:
  seg = op.attr("operandSegmentSizes")
  inputs = seg.values[0] if isinstance(seg, a.DenseArrayAttr) and seg.values \
      else 0
  return "input" if i < inputs else "carry"


# Ops that name the arguments of their regions (getAsmBlockArgumentNames):
# op name -> fn(op, argument index) -> name.
_REGION_ARG_NAMES = {
    "stablehlo.while": lambda op, i: "iterArg",
    "chlo.scan": _scan_arg_name,
}

# Ops with two or more ODS result definitions, named: MLIR's ODS generates
# getAsmResultNames from these (only the first value of each group is named).
_ODS_RESULT_NAMES = {
    "stablehlo.batch_norm_grad": ("grad_operand", "grad_scale", "grad_offset"),
    "stablehlo.batch_norm_training": ("output", "batch_mean", "batch_var"),
    "stablehlo.rng_bit_generator": ("output_state", "output"),
    "chlo.top_k": ("values", "indices"),
}

# Single-result ops of other dialects that name their result.
_FIXED_RESULT_NAMES = {
    "tensor.cast": "cast",
    "tensor.collapse_shape": "collapsed",
    "tensor.dim": "dim",
    "tensor.expand_shape": "expanded",
    "tensor.extract": "extracted",
    "tensor.extract_slice": "extracted_slice",
    "tensor.from_elements": "from_elements",
    "tensor.insert": "inserted",
    "tensor.insert_slice": "inserted_slice",
    "tensor.rank": "rank",
    "tensor.splat": "splat",
}


def sanitize(name: str) -> str:
  """MLIR's sanitizeIdentifier: invalid characters become '_', and a name
  starting with a digit gets a leading '_'."""
  name = _BAD_NAME_CHAR.sub("_", name)
  if name and name[0].isdigit():
    name = "_" + name
  return name


def _constant_name(op: core.Operation) -> Optional[str]:
  ty = op.results[0].type
  if isinstance(ty, (t.RankedTensorType, t.UnrankedTensorType)):
    return "c" if isinstance(ty.element_type, t.IntegerType) else "cst"
  return "cst"


def _arith_constant_name(op: core.Operation) -> Optional[str]:
  value = op.attr("value")
  ty = op.results[0].type
  if isinstance(value, a.BoolAttr):
    return "true" if value.value else "false"
  if isinstance(value, a.IntegerAttr):
    if isinstance(ty, t.IntegerType) and ty.width == 1:
      return "true" if value.value else "false"
    if isinstance(ty, t.IntegerType):
      return f"c{value.value}_{attr_printer.format_type(ty)}"
    return f"c{value.value}"
  return "cst"


def _result_names(op: core.Operation) -> Optional[list]:
  """The names `op` suggests for its results, one per result, or None."""
  if not op.results:
    return None
  if op.name == "stablehlo.constant" and len(op.results) == 1:
    return [_constant_name(op)]
  if op.name == "arith.constant" and len(op.results) == 1:
    return [_arith_constant_name(op)]
  fixed = _FIXED_RESULT_NAMES.get(op.name)
  if fixed is not None and len(op.results) == 1:
    return [fixed]
  names = _ODS_RESULT_NAMES.get(op.name)
  if names is not None and len(op.results) == len(names):
    return list(names)
  return None


class _Scope:
  """Names in use in one region and (through `parent`) around it."""

  __slots__ = ("parent", "names")

  def __init__(self, parent: Optional["_Scope"]):
    self.parent = parent
    self.names = set()

  def __contains__(self, name) -> bool:
    s = self
    while s is not None:
      if name in s.names:
        return True
      s = s.parent
    return False


class NameState:
  """Names every value and block of one op tree.

  After `run(op)`, `values` maps id(Value) -> the spelling of a use without
  '%' (`0`, `1#2`, `arg0`, `cst_1`) and `blocks` maps id(Block) -> `bbN`.
  """

  def __init__(self, generic: bool = False, keep_source_names: bool = False):
    self.generic = generic
    self.keep_source_names = keep_source_names
    self.values: dict[int, str] = {}
    self.blocks: dict[int, str] = {}
    self._next_value = 0
    self._next_arg = 0
    self._next_conflict = 0

  def run(self, op: core.Operation, shared=frozenset()) -> "NameState":
    if self.keep_source_names:
      _SourceNamer(self, shared).name_op(op, _SourceScope())
      return self
    top = _Scope(None)
    self._name_op(op, top)
    stack = [(r, 0, 0, 0, top) for r in op.regions]
    while stack:
      region, nv, na, nc, parent = stack.pop()
      if not self.generic:
        self._next_value, self._next_arg, self._next_conflict = nv, na, nc
      scope = _Scope(parent)
      self._name_region(region, scope)
      for block in region.blocks:
        for inner in block.operations:
          for r in inner.regions:
            stack.append((r, self._next_value, self._next_arg,
                          self._next_conflict, scope))
    return self

  # --- upstream scheme ------------------------------------------------------

  def _unique(self, name: str, scope: _Scope) -> str:
    name = sanitize(name)
    if name in scope:
      while True:
        probe = f"{name}_{self._next_conflict}"
        self._next_conflict += 1
        if probe not in scope:
          name = probe
          break
    scope.names.add(name)
    return name

  def _number(self) -> str:
    n = self._next_value
    self._next_value += 1
    return str(n)

  def _name_region(self, region: core.Region, scope: _Scope) -> None:
    owner = region.parent
    namer = None if self.generic or owner is None else _REGION_ARG_NAMES.get(
        owner.name)
    if namer is not None and region.blocks:
      for i, v in enumerate(region.blocks[0].arguments):
        self.values[id(v)] = self._unique(namer(owner, i), scope)
    for bi, block in enumerate(region.blocks):
      self.blocks[id(block)] = f"bb{bi}"
      for v in block.arguments:
        if id(v) in self.values:
          continue
        if bi == 0:
          self.values[id(v)] = self._unique(f"arg{self._next_arg}", scope)
          self._next_arg += 1
        else:
          self.values[id(v)] = self._number()
      for inner in block.operations:
        self._name_op(inner, scope)

  def _name_op(self, op: core.Operation, scope: _Scope) -> None:
    results = op.results
    if not results:
      return
    suggested = None if self.generic else _result_names(op)
    if suggested is None:
      self._name_group(results, self._number())
      return
    # Every table entry names single-value result groups, one per result; an
    # empty suggestion falls back to a number.
    for r, name in zip(results, suggested):
      self.values[id(r)] = self._unique(name, scope) if name else self._number()

  def _name_group(self, values, base: str) -> None:
    if len(values) == 1:
      self.values[id(values[0])] = base
    else:
      for i, v in enumerate(values):
        self.values[id(v)] = f"{base}#{i}"


# --- source names (opt-in) ---------------------------------------------------


class _SourceScope:
  """Names of one scope; child scopes see (and never shadow) parents'."""

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

  def claim(self, hint) -> Optional[str]:
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


class _SourceNamer:
  """Keeps the source's names (`Value.name_hint`) where they are usable."""

  def __init__(self, state: NameState, shared):
    self.state = state
    self.shared = shared if not state.generic else frozenset()

  def name_op(self, op: core.Operation, scope: _SourceScope) -> None:
    self._name_results(op, scope)
    self._name_regions(op, scope)

  def _name_regions(self, op: core.Operation, names: _SourceScope) -> None:
    values = self.state.values
    isolated = op.name in _ISOLATED
    shared = op.name in self.shared
    first_args = None
    for ri, region in enumerate(op.regions):
      scope = _SourceScope(None if isolated else names)
      for bi, block in enumerate(region.blocks):
        self.state.blocks[id(block)] = f"bb{bi}"
        for ai, v in enumerate(block.arguments):
          if (shared and ri > 0 and bi == 0 and first_args is not None and
              ai < len(first_args)):
            values[id(v)] = first_args[ai]
            scope.used.add(first_args[ai])
            continue
          values[id(v)] = scope.claim(v.name_hint) or scope.arg()
        if ri == 0 and bi == 0:
          first_args = [values[id(v)] for v in block.arguments]
      for block in region.blocks:
        for inner in block.operations:
          self._name_results(inner, scope)
      for block in region.blocks:
        for inner in block.operations:
          if inner.regions:
            self._name_regions(inner, scope)

  def _name_results(self, op, names: _SourceScope) -> None:
    values = self.state.values
    results = op.results
    if not results:
      return
    hints = [r.name_hint for r in results]
    if len(results) > 1 and len(set(hints)) == len(hints) and all(
        h and _NAME_RE.fullmatch(h) and not h[0].isdigit() for h in hints):
      for r in results:
        values[id(r)] = names.claim(r.name_hint)
      return
    base = names.claim(hints[0]) or names.number()
    if len(results) == 1:
      values[id(results[0])] = base
    else:
      for i, r in enumerate(results):
        values[id(r)] = f"{base}#{i}"
