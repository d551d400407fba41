"""The op registry: one `OpDef` per op name.

An `OpDef` carries everything that is known about an op in one place: its
schema (operand / result / attribute / region names), its verifier and result
type inference, the spec section that defines it and the spec constraint ids
the verifier checks. Components built later attach their per-op piece by
registration against the same name, never by editing this file:

  registry.set_pretty("stablehlo.add", "binary")        # text package
  registry.register_interpreter("stablehlo.add", fn)    # interpreter
  @registry.interpreter_kernel("stablehlo.slice")       # the same, at a def
  registry.register_hlo_lowering("stablehlo.add", fn)   # xla import

The `hlo_evaluator` and `cpu_codegen` slots are filled by xla (see
xla/tools/op_locations.py) with the pieces of the HLO opcode the op
lowers to.

The per-family modules (`elementwise`, `shape`, ...) register the ops
with `define_op` when imported; `get` / `all_ops` import them all on first
use.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from typing import Any, Callable, Iterable, Optional

import support

# Op families; each module calls `register` at import time.
_FAMILY_MODULES = (
    "stablehlo._src.ops.elementwise",
    "stablehlo._src.ops.shape",
    "stablehlo._src.ops.control_flow",
    "stablehlo._src.ops.reduce",
    "stablehlo._src.ops.gather_scatter",
    "stablehlo._src.ops.linalg",
    "stablehlo._src.ops.collectives",
    "stablehlo._src.ops.quantization",
    "stablehlo._src.ops.misc",
    "stablehlo._src.ops.other_dialects",
    "stablehlo._src.ops.sdy",
)

# Traits (property sets, as XLA keeps them): tables over scattered ifs.
ELEMENTWISE = "elementwise"
COMMUTATIVE = "commutative"
TERMINATOR = "terminator"
SIDE_EFFECT = "side_effect"
DEPRECATED = "deprecated"
COLLECTIVE = "collective"

# Implementation slots that later components fill by registration.
SLOTS = ("interpreter", "hlo_lowering", "hlo_evaluator", "cpu_codegen")


@dataclasses.dataclass
class OpDef:
  """Everything the project knows about one op.

  Attributes:
    name: full op name, e.g. "stablehlo.slice".
    spec: the section of the StableHLO spec (docs/spec.md) that defines the
      op (its heading, e.g. "slice"), or None for ops outside the spec.
    operands / results / regions: names in order; a trailing "*" marks a
      variadic entry, "?" an optional one. None: not checked.
    attributes: attribute name -> short kind description ("i64", "i64[]",
      "enum", "bool", ...); a name ending in "?" is optional.
    verify: `verify(ctx: verify.Ctx) -> None`, raises VerificationError.
    infer: `infer(ctx) -> list[Type]` where the spec fixes the result types.
    checks: the constraint ids (e.g. "slice_c3") that `verify` checks.
    traits: a set of the trait names above.
    summary: one line describing the op.
    pretty: name of the op's pretty syntax (set by the text package).
    interpreter / hlo_lowering / hlo_evaluator / cpu_codegen: the
      implementation registered by later components, or None (xla fills
      the last two with the evaluator kernel and CPU emitter of the HLO
      opcode the op lowers to; see xla/tools/op_locations.py). `unsupported` maps a slot to a reason
      where an op is deliberately not implemented there.
  """

  name: str
  spec: Optional[str] = None
  operands: Optional[tuple] = None
  results: Optional[tuple] = None
  attributes: dict = dataclasses.field(default_factory=dict)
  regions: Optional[tuple] = ()
  verify: Optional[Callable[[Any], None]] = None
  infer: Optional[Callable[[Any], list]] = None
  checks: tuple = ()
  traits: frozenset = frozenset()
  summary: str = ""
  pretty: Optional[str] = None
  interpreter: Any = None
  hlo_lowering: Any = None
  hlo_evaluator: Any = None
  cpu_codegen: Any = None
  unsupported: dict = dataclasses.field(default_factory=dict)

  @property
  def dialect(self) -> str:
    return self.name.split(".", 1)[0]

  @property
  def short_name(self) -> str:
    """The name used in constraint ids: "slice" for "stablehlo.slice"."""
    if self.dialect == "stablehlo":
      return self.name.split(".", 1)[1]
    return self.name

  @property
  def required_attributes(self) -> tuple:
    return tuple(k for k in self.attributes if not k.endswith("?"))


_REGISTRY: dict[str, OpDef] = {}
_LOCK = threading.RLock()
_loaded = False


def register(opdef: OpDef) -> OpDef:
  """Adds `opdef`; registering a name twice is an error."""
  with _LOCK:
    if opdef.name in _REGISTRY:
      raise support.AlreadyExistsError(f"op '{opdef.name}' already registered")
    _REGISTRY[opdef.name] = opdef
  return opdef


def define_op(name: str, verify: Optional[Callable[[Any], None]] = None,
              checks: Iterable[str] = (), operands: Optional[tuple] = None, *,
              results: Optional[tuple] = ("result",),
              attributes: Optional[dict] = None, regions: Optional[tuple] = (),
              infer: Optional[Callable[[Any], list]] = None,
              traits: frozenset = frozenset(), spec: bool = True,
              summary: str = "") -> OpDef:
  """Registers the op `name`, its full name ("stablehlo.slice"), and
  returns its OpDef: the one way the family modules define an op, so that
  a search for the full name finds its definition.

  `checks` are the verifier's constraint ids without the op's prefix
  ("c3" is recorded as "slice_c3"); `spec=True` names the op's spec
  section after its short name, False marks an op outside the spec. The
  other arguments are OpDef's fields."""
  d = OpDef(name=name, operands=operands, results=results,
            attributes=attributes or {}, regions=regions, verify=verify,
            infer=infer, traits=traits, summary=summary)
  short = d.short_name
  d.spec = short if spec else None
  d.checks = tuple(f"{short}_{x}" for x in checks)
  return register(d)


@dataclasses.dataclass
class AttrVerifierDef:
  """A verifier of a discardable attribute (e.g. "sdy.sharding"), run on
  every op that carries it and on function argument / result attributes.

  `verify(ctx, value, owner)`: `ctx` is the carrying op's `verify.Ctx` whose
  `short` is the attribute name (so errors read `sdy.sharding_rank: ...`);
  `owner` is None for an op attribute, ("arg" | "result", index, type) for
  a function argument / result attribute.
  """

  name: str
  verify: Callable[[Any, Any, Any], None]


_ATTR_VERIFIERS: dict[str, AttrVerifierDef] = {}


def define_attr_verifier(name: str, verify: Callable[[Any, Any, Any], None]
                         ) -> AttrVerifierDef:
  """Registers the verifier of the discardable attribute `name`, by its full
  name (e.g. "sdy.sharding")."""
  d = AttrVerifierDef(name, verify)
  with _LOCK:
    if name in _ATTR_VERIFIERS:
      raise support.AlreadyExistsError(
          f"attribute verifier '{name}' already registered")
    _ATTR_VERIFIERS[name] = d
  return d


def lookup_attr_verifier(name: str) -> Optional[AttrVerifierDef]:
  _ensure_loaded()
  return _ATTR_VERIFIERS.get(name)


def _ensure_loaded() -> None:
  global _loaded
  if _loaded:
    return
  with _LOCK:
    if _loaded:
      return
    for mod in _FAMILY_MODULES:
      importlib.import_module(mod)
    _loaded = True


def lookup(name: str) -> Optional[OpDef]:
  """The OpDef for `name`, or None."""
  _ensure_loaded()
  return _REGISTRY.get(name)


def get(name: str) -> OpDef:
  """The OpDef for `name`; NotFoundError if there is none."""
  d = lookup(name)
  if d is None:
    raise support.NotFoundError(f"no op named '{name}' is registered")
  return d


def all_ops() -> list[OpDef]:
  """Every registered OpDef, sorted by name."""
  _ensure_loaded()
  return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def names(dialect: Optional[str] = None) -> list[str]:
  return [d.name for d in all_ops() if dialect is None or d.dialect == dialect]


def with_trait(trait: str) -> list[OpDef]:
  return [d for d in all_ops() if trait in d.traits]


# --- registration by later components -----------------------------------------


def set_slot(name: str, slot: str, value: Any) -> None:
  """Attaches an implementation to the op `name` (slot in SLOTS or
  "pretty"). Re-registering replaces the previous value."""
  if slot not in SLOTS and slot != "pretty":
    raise support.InvalidArgumentError(f"unknown registry slot '{slot}'")
  d = get(name)
  with _LOCK:
    setattr(d, slot, value)


def set_pretty(name: str, syntax: str) -> None:
  set_slot(name, "pretty", syntax)


def register_interpreter(name: str, kernel: Any) -> None:
  set_slot(name, "interpreter", kernel)


def interpreter_kernel(*names: str) -> Callable:
  """Decorator: registers the function it decorates as the interpreter
  kernel of each op in `names` (full names), where the kernel is defined.
  A kernel built by a factory registers with `register_interpreter`."""

  def wrap(kernel):
    for name in names:
      register_interpreter(name, kernel)
    return kernel

  return wrap


def register_hlo_lowering(name: str, lowering: Any) -> None:
  set_slot(name, "hlo_lowering", lowering)


def mark_unsupported(name: str, slot: str, reason: str) -> None:
  """Records that `name` deliberately has no `slot` implementation."""
  if slot not in SLOTS:
    raise support.InvalidArgumentError(f"unknown registry slot '{slot}'")
  get(name).unsupported[slot] = reason


def implementation(name: str, slot: str) -> Any:
  return getattr(get(name), slot)


def missing(slot: str, names_: Optional[Iterable[str]] = None) -> list[str]:
  """Ops with neither an implementation in `slot` nor an unsupported reason
  (what a coverage test asserts to be empty)."""
  ops = all_ops() if names_ is None else [get(n) for n in names_]
  return [d.name for d in ops
          if getattr(d, slot) is None and slot not in d.unsupported]
