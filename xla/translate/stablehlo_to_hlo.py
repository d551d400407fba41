"""StableHLO -> HLO import (XLA's xla/hlo/translate/stablehlo_to_hlo).

`stablehlo_to_hlo(module)` turns the entry function (@main, or the only
public function) into an HloModule:

  * the function's arguments become entry parameters, its results the root
    (a tuple when there is not exactly one result);
  * `func.call` is inlined, `stablehlo.composite` through its decomposition
    function;
  * regions become computations: reduce-like regions take their block
    arguments as parameters; `while` / `if` / `case` regions, which may use
    values from the enclosing scope, take one tuple parameter holding their
    arguments followed by the captured values (as XLA's importer does);
  * `ml_program.global`s become extra entry parameters (in declaration
    order, after the function's arguments) and their final values extra
    outputs; the module's frontend attribute `ml_program.globals` lists
    their names;
  * shardings (`mhlo.sharding`, Shardy's `sdy.sharding` and sdy ops) become
    HLO `sharding=` attributes and the SPMD custom calls
    (`sharding_import.py`), for the SPMD partitioner;
  * each op lowers through the function registered for it in the op
    registry's `hlo_lowering` slot (`lowerings.py`); an op without one raises
    UnimplementedError naming it. CHLO ops must be legalized first
    (stablehlo.transforms.chlo_legalize).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Optional, Sequence

import support
from stablehlo import attributes as a
from stablehlo import ir as core
from stablehlo.ops import registry
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_module import HloModule
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.shape import Shape
from xla.translate import sharding_import
from xla.translate import type_conversion as tc
from xla.translate.region_util import free_values as free_values

GLOBALS_ATTRIBUTE = "ml_program.globals"
_TERMINATORS = ("stablehlo.return", "func.return", "sdy.return")
# Attributes that give an op's results shardings (sharding_import.py).
_SHARDING_ATTRIBUTES = (sharding_import.MHLO_SHARDING,
                        sharding_import.SDY_SHARDING)
_MAX_INLINE_DEPTH = 64


class _Scope:
  """Maps StableHLO values to HLO instructions of one computation."""

  def __init__(self, capture: Optional[Callable] = None):
    self.values: dict[int, HloInstruction] = {}
    self.capture = capture

  def bind(self, value: core.Value, instr: HloInstruction) -> None:
    self.values[id(value)] = instr

  def get(self, value: core.Value) -> HloInstruction:
    instr = self.values.get(id(value))
    if instr is None:
      if self.capture is None:
        raise support.InvalidArgumentError(
            f"value {value} is used outside the scope that defines it")
      instr = self.capture(value)
      self.values[id(value)] = instr
    return instr


class Importer:
  """Builds one HloModule from one StableHLO module."""

  def __init__(self, module: core.Module, name: str):
    self.module = module
    self.hlo = HloModule(name)
    self._inline_depth = 0
    # ml_program global name -> current HLO value (entry scope only).
    self.globals: dict[str, HloInstruction] = {}
    self.computation: Optional[HloComputation] = None
    self._entry: Optional[HloComputation] = None
    self.scope: Optional[_Scope] = None
    # Depths of scalar computations (reduction bodies, ...) and of manual
    # computations being lowered: shardings inside either are dropped.
    self._scalar_depth = 0
    self._manual_depth = 0

  # -- helpers used by the lowerings --------------------------------------

  def hlo_entry_computation(self) -> Optional[HloComputation]:
    """The entry computation being built."""
    return self._entry

  def add(self, instr: HloInstruction) -> HloInstruction:
    if self._manual_depth and not self._scalar_depth and (
        instr.sharding is None):
      # In a (fully) manual computation's body every value is manual, as
      # Shardy's export marks it.
      instr.sharding = sharding_import.MANUAL
    return self.computation.add_instruction(instr)

  def operand(self, op: core.Operation, i: int) -> HloInstruction:
    return self.scope.get(op.operands[i])

  def operands(self, op: core.Operation) -> list[HloInstruction]:
    return [self.scope.get(v) for v in op.operands]

  def tuple_or_single(self, instrs: Sequence[HloInstruction]
                      ) -> HloInstruction:
    if len(instrs) == 1:
      return instrs[0]
    return self.add(hi.create_tuple(list(instrs)))

  def unpack(self, instr: HloInstruction, count: int
             ) -> list[HloInstruction]:
    """`count` results of an instruction: itself, or its tuple elements."""
    if count == 1:
      return [instr]
    return [self.add(hi.create_get_tuple_element(instr, i))
            for i in range(count)]

  def result_shape(self, op: core.Operation) -> Shape:
    """The shape of `op`'s results: one shape, or a tuple of them."""
    shapes = [tc.shape(ty) for ty in op.result_types]
    if len(shapes) == 1:
      return shapes[0]
    return Shape.tuple_of(shapes)

  def drops_shardings(self) -> bool:
    """Whether shardings of the ops being lowered are dropped: inside a
    scalar computation or a manual computation's body there is nothing
    left to split."""
    return bool(self._scalar_depth or self._manual_depth)

  def in_manual_computation(self) -> bool:
    return bool(self._manual_depth)

  @contextlib.contextmanager
  def manual_computation(self):
    """Lowers a manual computation's body (see `drops_shardings`)."""
    self._manual_depth += 1
    try:
      yield
    finally:
      self._manual_depth -= 1

  def lookup_function(self, symbol: a.Attribute) -> core.Operation:
    name = symbol.root if isinstance(symbol, a.SymbolRefAttr) else (
        symbol.value if isinstance(symbol, a.StringAttr) else None)
    fn = self.module.lookup(name) if name else None
    if fn is None or fn.name != "func.func":
      raise support.NotFoundError(f"function @{name} not found")
    return fn

  # -- regions and blocks -------------------------------------------------

  def lower_block(self, block: core.Block) -> list[HloInstruction]:
    """Lowers the ops of `block` into the current computation; returns the
    instructions of its terminator's operands."""
    for op in block.operations:
      if op.name in _TERMINATORS:
        return self.operands(op)
      self.lower_op(op)
    raise support.InvalidArgumentError("block has no terminator")

  def lower_op(self, op: core.Operation) -> None:
    opdef = registry.lookup(op.name)
    fn = opdef.hlo_lowering if opdef is not None else None
    if fn is None:
      reason = opdef.unsupported.get("hlo_lowering") if opdef else None
      hint = ""
      if op.dialect == "chlo":
        hint = " (legalize CHLO first with chlo_legalize.run)"
      raise support.UnimplementedError(
          f"Unimplemented: HLO import of {op.name}"
          f"{': ' + reason if reason else ''}{hint}")
    results = fn(self, op)
    if len(results) != len(op.results):
      raise support.InternalError(
          f"lowering of {op.name} gave {len(results)} values for "
          f"{len(op.results)} results")
    attributes = op.attributes
    if (_SHARDING_ATTRIBUTES[0] in attributes or
        _SHARDING_ATTRIBUTES[1] in attributes):
      sharding_import.set_result_shardings(self, op, results)
    for v, instr in zip(op.results, results):
      self.scope.bind(v, instr)

  def inline_function(self, fn: core.Operation,
                      args: Sequence[HloInstruction]
                      ) -> list[HloInstruction]:
    """Lowers the body of `fn` into the current computation."""
    return self.inline_region(fn.regions[0], args)

  def inline_region(self, region: core.Region,
                    args: Sequence[HloInstruction]
                    ) -> list[HloInstruction]:
    """Lowers the entry block of `region`, which sees no values from
    outside it (a function's body, an IsolatedFromAbove region), into
    the current computation with `args` for its arguments."""
    if self._inline_depth >= _MAX_INLINE_DEPTH:
      raise support.UnimplementedError(
          "Unimplemented: recursive function calls in HLO import")
    block = region.entry
    outer = self.scope
    self.scope = _Scope(capture=None)
    self._inline_depth += 1
    try:
      for v, instr in zip(block.arguments, args):
        self.scope.bind(v, instr)
      return self.lower_block(block)
    finally:
      self._inline_depth -= 1
      self.scope = outer

  def _in_new_computation(self, name: str, build: Callable
                          ) -> HloComputation:
    comp = HloComputation(name)
    outer = (self.computation, self.scope)
    self.computation = comp
    try:
      root = build(comp)
      comp.set_root_instruction(root)
    finally:
      self.computation, self.scope = outer
    return self.hlo.add_embedded_computation(comp)

  def scalar_computation(self, region: core.Region, name: str
                         ) -> HloComputation:
    """A computation whose parameters are the region's block arguments
    (reduce, sort, scatter, map, ... bodies). Captured constants are
    re-created inside; other captures are not expressible in HLO."""
    block = region.entry

    def capture(value):
      owner = value.owner
      if isinstance(owner, core.Operation) and owner.name == (
          "stablehlo.constant"):
        return self.add(hi.create_constant(
            tc.literal(owner.attr("value"), value.type)))
      raise support.UnimplementedError(
          f"Unimplemented: region of {name} uses a non-constant value from "
          "its enclosing scope")

    def build(comp):
      self.scope = _Scope(capture=capture)
      for i, arg in enumerate(block.arguments):
        p = comp.add_parameter(hi.create_parameter(
            i, tc.shape(arg.type), name=f"Arg_{i}"))
        self.scope.bind(arg, p)
      self._scalar_depth += 1
      try:
        return self.tuple_or_single(self.lower_block(block))
      finally:
        self._scalar_depth -= 1

    return self._in_new_computation(name, build)

  def tuple_computation(self, region: core.Region, name: str,
                        param_shape: Shape, captures: Sequence[core.Value],
                        num_args: int, result: Callable
                        ) -> HloComputation:
    """A computation with one tuple parameter: the region's block arguments
    (the first `num_args` elements), then `captures`. `result(comp, param,
    values)` builds the root from the terminator's values."""
    block = region.entry

    def build(comp):
      self.scope = _Scope(capture=None)
      param = comp.add_parameter(hi.create_parameter(0, param_shape,
                                                     name="arg_tuple"))
      for i, arg in enumerate(block.arguments[:num_args]):
        self.scope.bind(arg, self.add(hi.create_get_tuple_element(param, i)))
      for j, v in enumerate(captures):
        self.scope.bind(v, self.add(
            hi.create_get_tuple_element(param, num_args + j)))
      values = self.lower_block(block)
      return result(comp, param, values)

    return self._in_new_computation(name, build)

  # -- entry --------------------------------------------------------------

  def import_entry(self, fn: core.Operation) -> HloModule:
    name = fn.attr("sym_name").value
    comp = HloComputation(name)
    self.computation = self._entry = comp
    self.scope = _Scope(capture=None)
    block = fn.regions[0].entry
    arg_attrs = _attribute_dicts(fn.attr("arg_attrs"), len(block.arguments))
    n = 0
    for arg, attrs in zip(block.arguments, arg_attrs):
      p = comp.add_parameter(hi.create_parameter(n, tc.shape(arg.type),
                                                 name=f"Arg_{n}"))
      sharding = sharding_import.entry_sharding(fn, attrs) if attrs else None
      if sharding is not None:
        p.sharding = sharding_import.text(sharding)
      self.scope.bind(arg, p)
      n += 1
    global_names = []
    for op in self.module.body.operations:
      if op.name == "ml_program.global":
        gname = op.attr("sym_name").value
        gtype = op.attr("type")
        gtype = gtype.value if isinstance(gtype, a.TypeAttr) else (
            op.attr("value").type)
        p = comp.add_parameter(hi.create_parameter(
            n, tc.shape(gtype), name=f"global_{gname}"))
        self.globals[gname] = p
        global_names.append(gname)
        n += 1
    results = self.lower_block(block)
    outputs = list(results) + [self.globals[g] for g in global_names]
    shardings = [
        sharding_import.entry_sharding(fn, attrs) if attrs else None
        for attrs in _attribute_dicts(fn.attr("res_attrs"), len(results))]
    shardings += [None] * (len(outputs) - len(shardings))
    if len(outputs) == 1:
      root = outputs[0]
      if shardings[0] is not None:
        if root.sharding is not None or root.opcode == HloOpcode.kParameter:
          # The value keeps its own sharding; the output is a copy.
          root = self.add(hi.create_unary(root.shape, HloOpcode.kCopy, root))
        root.sharding = sharding_import.text(shardings[0])
    else:
      root = self.add(hi.create_tuple(outputs))
      if any(s is not None for s in shardings):
        # Outputs without a sharding are left to propagation.
        root.sharding = sharding_import.text(
            sharding_import.HloSharding.tuple_sharding(
                [s if s is not None else
                 sharding_import.HloSharding.unknown() for s in shardings]))
    comp.set_root_instruction(root)
    self.hlo.add_entry_computation(comp)
    if global_names:
      self.hlo.frontend_attributes[GLOBALS_ATTRIBUTE] = ",".join(global_names)
    return self.hlo


def _attribute_dicts(attr, count: int) -> list[dict]:
  """The per-argument (or per-result) attribute dictionaries of a
  function's `arg_attrs` / `res_attrs`."""
  out: list[dict] = [{} for _ in range(count)]
  if isinstance(attr, a.ArrayAttr):
    for i, entry in enumerate(attr.elements[:count]):
      if isinstance(entry, a.DictionaryAttr):
        out[i] = dict(entry.entries)
  return out


def entry_function(module: core.Module, entry: Optional[str] = None
                   ) -> core.Operation:
  """@entry, else @main, else the only public (or only) function."""
  fns = module.functions
  if entry is not None:
    fn = module.lookup(entry)
    if fn is None or fn.name != "func.func":
      raise support.NotFoundError(f"entry function @{entry} not found")
    return fn
  main = module.lookup("main")
  if main is not None and main.name == "func.func":
    return main
  public = [f for f in fns if not isinstance(
      f.attr("sym_visibility"), a.StringAttr) or
            f.attr("sym_visibility").value == "public"]
  if len(public) == 1:
    return public[0]
  if len(fns) == 1:
    return fns[0]
  raise support.InvalidArgumentError(
      "module has no @main and no single public function; pass entry=")


def stablehlo_to_hlo(module: core.Module, *, entry: Optional[str] = None
                     ) -> HloModule:
  """Imports `module`'s entry function into a new HloModule."""
  # Registers the per-op lowerings on first use.
  from xla.translate import lowerings  # pylint: disable=g-import-not-at-top,unused-import
  from xla.translate import lowerings_regions  # pylint: disable=g-import-not-at-top,unused-import
  fn = entry_function(module, entry)
  name = "main"
  sym = module.op.attr("sym_name")
  if isinstance(sym, a.StringAttr):
    name = sym.value
  return Importer(module, name).import_entry(fn)


def legalize_and_import(module: core.Module, *, entry: Optional[str] = None
                        ) -> HloModule:
  """Rewrites `module` in place into what the importer takes (CHLO ops to
  StableHLO, uniform quantized types to integer arithmetic: the StableHLO
  passes chlo_legalize and quant_legalize), then imports it."""
  from stablehlo.transforms import chlo_legalize  # pylint: disable=g-import-not-at-top
  from stablehlo.transforms import quant_legalize  # pylint: disable=g-import-not-at-top
  chlo_legalize.run(module)
  quant_legalize.run(module)
  return stablehlo_to_hlo(module, entry=entry)
