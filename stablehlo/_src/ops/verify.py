"""Op verification: the error type, the per-op check context and the walkers.

A verifier is a function `verify(ctx)` registered with the op's `OpDef`. It
reads the op through `ctx` and reports a violated spec constraint with
`ctx.fail("c3", ...)` / `ctx.check(cond, "c3", ...)`, which raise a
`VerificationError` whose message names the op, the constraint id
(`slice_c3`) and the offending values, prefixed by the op's source location.

Constraints that depend on unknown (dynamic) dimensions pass: every shape
comparison here treats a `None` dimension as compatible with anything.
"""

from __future__ import annotations

import re
from typing import Iterable, NoReturn, Optional

import support
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.ops import quantization
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu


_CONSTRAINT_ID = re.compile(r"[a-z_]+_c[0-9]+")


class VerificationError(support.InvalidArgumentError):
  """An op violates a constraint of its definition.

  Attributes:
    op_name: the full op name (e.g. "stablehlo.slice").
    constraint: the constraint id (e.g. "slice_c3"), or a schema tag.
  """

  def __init__(self, message: str, op_name: str = "", constraint: str = ""):
    super().__init__(message)
    self.op_name = op_name
    self.constraint = constraint


def location_prefix(loc: Optional[a.Location]) -> str:
  """`file:line:col: error: ` for a file location, `error: ` otherwise."""
  if loc is not None and loc.filename:
    return f"{loc.filename}:{loc.line}:{loc.col}: error: "
  return "error: "


def op_error(op: core.Operation, tag: str, message: str) -> VerificationError:
  """Builds the error for `op` violating the constraint `tag`."""
  text = f"{location_prefix(op.location)}'{op.name}' op "
  if tag:
    text += f"{tag}: "
  return VerificationError(text + message, op.name, tag)


class Ctx:
  """What a verifier sees: the op, plus helpers that raise tagged errors."""

  def __init__(self, op: core.Operation, opdef):
    self.op = op
    self.opdef = opdef
    self.short = opdef.short_name if opdef is not None else op.name

  # --- failing -------------------------------------------------------------

  def tag(self, cid: str) -> str:
    """`c3` -> `slice_c3`; full ids and schema tags pass through."""
    if cid.startswith("c") and cid[1:].isdigit():
      return f"{self.short}_{cid}"
    return cid

  def fail(self, cid: str, message: str) -> NoReturn:
    tag = self.tag(cid)
    if self.opdef is not None and _CONSTRAINT_ID.fullmatch(tag):
      # Internal invariant: verifiers only raise ids they declare, so the
      # status table's coverage counts stay honest.
      assert tag in self.opdef.checks, (self.op.name, tag)
    raise op_error(self.op, tag, message)

  def check(self, cond, cid: str, message) -> None:
    if not cond:
      self.fail(cid, message() if callable(message) else message)

  # --- operands, results, attributes ---------------------------------------

  @property
  def operand_types(self):
    return self.op.operand_types

  @property
  def result_types(self):
    return self.op.result_types

  def has(self, name: str) -> bool:
    return self.op.attr(name) is not None

  def attr(self, name: str, default=None):
    return self.op.attr(name, default)

  def ints(self, name: str, default=None, cid: str = "schema"):
    """An integer-list attribute (array<i64>, dense, [..]) as a tuple."""
    v = self.op.attr(name)
    if v is None:
      if default is None:
        self.fail(self.short + "_schema" if cid == "schema" else cid,
                  f"requires attribute '{name}'")
      return tuple(default)
    try:
      return tu.ints(v)
    except (TypeError, ValueError):
      self.fail(self.short + "_schema", f"attribute '{name}' must be a list "
                f"of integers, got {v!r}")

  def int(self, name: str, default=None):
    v = self.op.attr(name)
    if v is None:
      if default is None:
        self.fail(self.short + "_schema", f"requires attribute '{name}'")
      return default
    try:
      return tu.int_value(v)
    except (TypeError, ValueError):
      self.fail(self.short + "_schema",
                f"attribute '{name}' must be an integer, got {v!r}")

  def bool(self, name: str, default: bool = False) -> bool:
    return tu.bool_value(self.op.attr(name), default)

  def enum(self, name: str, default=None):
    v = self.op.attr(name)
    if v is None:
      return default
    return tu.enum_value(v)

  def dim_numbers(self, name: str):
    """A dimension-numbers dialect attribute as a `tu.Params` accessor."""
    v = self.op.attr(name)
    if v is None:
      self.fail(self.short + "_schema", f"requires attribute '{name}'")
    return tu.Params(v)

  # --- result checking ------------------------------------------------------

  def check_result_shape(self, index: int, expected, cid: str, what: str = ""):
    """Checks result `index` has a shape compatible with `expected`."""
    rt = self.result_types[index]
    shape = tu.shape_of(rt)
    if shape is None or expected is None:
      return
    self.check(tu.shapes_compatible(shape, expected), cid,
               lambda: f"{what or 'result'} shape {tu.fmt_shape(shape)} does "
               f"not match the expected {tu.fmt_shape(expected)}")


# --- walking ----------------------------------------------------------------

# Dialects whose ops we never know and accept without checking by default.
DEFAULT_ALLOWED_UNREGISTERED = frozenset()


def verify_op(op: core.Operation, *, recursive: bool = False,
              allow_unregistered: Iterable[str] = DEFAULT_ALLOWED_UNREGISTERED
              ) -> None:
  """Verifies one op (and, if `recursive`, every op nested in it)."""
  allowed = frozenset(allow_unregistered)
  ops = op.walk() if recursive else (op,)
  for o in ops:
    opdef = registry.lookup(o.name)
    if opdef is None:
      if o.dialect in allowed:
        _check_dialect_attributes(o, None)
        continue
      raise op_error(o, "", "is not a registered operation (dialect "
                     f"'{o.dialect}' is not allowed to be unregistered)")
    ctx = Ctx(o, opdef)
    _check_schema(ctx)
    _check_quantized_types(ctx)
    if opdef.verify is not None:
      opdef.verify(ctx)
    _check_dialect_attributes(o, opdef)


def _check_dialect_attributes(op: core.Operation, opdef) -> None:
  """Runs the registered verifiers of the op's discardable attributes and of
  its function argument / result attributes."""
  for name, value in op.attributes.items():
    d = registry.lookup_attr_verifier(name)
    if d is not None:
      d.verify(_attr_ctx(op, opdef, name), value, None)
  ft = op.attr("function_type")
  if not (isinstance(ft, a.TypeAttr) and isinstance(ft.value, t.FunctionType)):
    return
  for key, kind, types in (("arg_attrs", "arg", ft.value.inputs),
                           ("res_attrs", "result", ft.value.results)):
    dicts = op.attr(key)
    if not isinstance(dicts, a.ArrayAttr):
      continue
    for i, (d_attr, ty) in enumerate(zip(dicts.elements, types)):
      for name, value in getattr(d_attr, "entries", ()):
        d = registry.lookup_attr_verifier(name)
        if d is not None:
          d.verify(_attr_ctx(op, opdef, name), value, (kind, i, ty))


def _attr_ctx(op, opdef, name: str) -> Ctx:
  ctx = Ctx(op, opdef)
  ctx.short = name
  ctx.opdef = None  # the attribute's constraint ids are not the op's
  return ctx


def verify_module(module, *,
                  allow_unregistered: Iterable[str] =
                  DEFAULT_ALLOWED_UNREGISTERED) -> None:
  """Verifies every op of `module` (a `core.Module` or a module Operation)."""
  root = module.op if isinstance(module, core.Module) else module
  verify_op(root, recursive=True, allow_unregistered=allow_unregistered)


def infer_result_types(op: core.Operation):
  """The result types the spec determines for `op`, or None if it does not.

  Raises VerificationError where the operands or attributes make inference
  impossible (they violate a constraint the inference relies on).
  """
  opdef = registry.lookup(op.name)
  if opdef is None or opdef.infer is None:
    return None
  return opdef.infer(Ctx(op, opdef))


def _check_schema(ctx: Ctx) -> None:
  """Counts operands / results / regions against the op's declared schema."""
  d = ctx.opdef
  tag = d.short_name + "_schema"
  op = ctx.op
  if d.operands is not None:
    lo, hi = _arity(d.operands)
    n = len(op.operands)
    if n < lo or (hi is not None and n > hi):
      want = str(lo) if lo == hi else (f"at least {lo}" if hi is None
                                       else f"{lo}..{hi}")
      ctx.fail(tag, f"expects {want} operands ({', '.join(d.operands)}), "
               f"got {n}")
  if d.results is not None:
    lo, hi = _arity(d.results)
    n = len(op.results)
    if n < lo or (hi is not None and n > hi):
      want = str(lo) if lo == hi else (f"at least {lo}" if hi is None
                                       else f"{lo}..{hi}")
      ctx.fail(tag, f"expects {want} results ({', '.join(d.results)}), "
               f"got {n}")
  if d.regions is not None:
    lo, hi = _arity(d.regions)
    n = len(op.regions)
    if n < lo or (hi is not None and n > hi):
      ctx.fail(tag, f"expects {lo if lo == hi else f'at least {lo}'} regions"
               f", got {n}")
  for name in d.required_attributes:
    if op.attr(name) is None:
      ctx.fail(tag, f"requires attribute '{name}'")


def _check_quantized_types(ctx: Ctx) -> None:
  """Every quantized tensor type the op produces is well formed."""
  for i, ty in enumerate(ctx.op.result_types):
    e = tu.element_type(ty)
    if isinstance(e, t.QuantizedType):
      why = quantization.quantized_type_problem(e, tu.shape_of(ty))
      if why is not None:
        ctx.fail("quantized_type", f"result #{i} {tu.fmt_type(ty)}: {why}")


def _arity(names) -> tuple[int, Optional[int]]:
  lo, hi = 0, 0
  for n in names:
    if n.endswith("*"):
      hi = None
    elif n.endswith("?"):
      if hi is not None:
        hi += 1
    else:
      lo += 1
      if hi is not None:
        hi += 1
  return lo, hi
