"""Capability query: which ops of a StableHLO program a backend supports.

    table = capability.interpreter_table()          # or source("xla_cpu")
    report = capability.query(program, table)       # text, bytecode, Module
    report.status                                   # "supported" / ...
    for op in report.ops: print(op.name, op.status, op.reasons)

The answer comes from a `CapabilityTable` and a walk over the program's ops,
never from compiling, so it costs a few milliseconds beyond parsing. Every
op gets one of three verdicts:

  supported    the backend has an implementation for this op and its types;
  unsupported  it has none (with the reason the backend recorded);
  maybe        support depends on something the table cannot decide
               statically: a custom_call target registered at run time,
               element types such as f8 that only some kernels take,
               dynamic dimensions, quantized types, or a plugin that says
               nothing about itself.

Tables come from *sources*, registered by name, so that a backend brings its
own without this module importing it (pjrt may not import xla, see
ci/layering):
  * "interpreter": the StableHLO reference interpreter, read from the op
    registry (`stablehlo.ops.registry`, the table that
    `stablehlo.tools.status_table` prints) and the interpreter's custom_call
    targets. Always available.
  * a compiler backend registers its own, e.g. our CPU plugin:
        capability.register_source(
            "xla_cpu", lambda: capability.hlo_coverage_table(
                coverage_table, name="xla_cpu"))
    where `coverage_table` maps HLO opcode names to their CPU status
    (`hlo_coverage_table` maps StableHLO ops onto HLO opcodes).
`default_table()` is "xla_cpu" when registered, else the interpreter's.

A PJRT plugin is matched to a source through its plugin attribute
`capability_source` (a string naming a registered source) or an explicit
`bind_plugin`; a plugin with neither (any foreign `.so`) gets a table that
answers "maybe" for every op, unless the caller passes a table, e.g. one
read from JSON (`CapabilityTable.from_json`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import threading
from typing import (Any, Callable, Collection, Iterable, Mapping, Optional,
                    Sequence)

import support
from stablehlo import attributes as a
from stablehlo import ir as core
from stablehlo import text as mlir_text
from stablehlo import types as t
from stablehlo.bytecode import reader as bytecode_reader
from stablehlo.ops import registry
from stablehlo.ops import typeutil
from stablehlo.vhlo import portable

SUPPORTED = "supported"
MAYBE = "maybe"
UNSUPPORTED = "unsupported"
STATUSES = (SUPPORTED, MAYBE, UNSUPPORTED)
_RANK = {SUPPORTED: 0, MAYBE: 1, UNSUPPORTED: 2}

# The plugin attribute (PJRT_Plugin_Attributes) naming a registered source.
PLUGIN_ATTRIBUTE = "capability_source"
NO_INFORMATION = "plugin exposes no capability information"

# Key of quantized element types in `CapabilityTable.element_types`.
QUANTIZED = "quant.uniform"
QUANTIZED_PER_AXIS = "quant.uniform:per_axis"

# Ops that only hold or end a program; every backend runs them.
STRUCTURAL_OPS = frozenset({
    "builtin.module", "func.func", "func.return", "stablehlo.return",
    "ml_program.global",
})


@dataclasses.dataclass(frozen=True)
class Verdict:
  """A status and why (the reason is empty for "supported")."""

  status: str
  reason: str = ""

  def __post_init__(self):
    if self.status not in _RANK:
      raise support.InvalidArgumentError(
          f"capability status must be one of {', '.join(STATUSES)}, got "
          f"{self.status!r}")

  def to_json(self) -> Any:
    if not self.reason:
      return self.status
    return {"status": self.status, "reason": self.reason}

  @classmethod
  def from_json(cls, value: Any) -> "Verdict":
    if isinstance(value, str):
      return cls(value)
    if isinstance(value, (list, tuple)) and 1 <= len(value) <= 2:
      return cls(*[str(v) for v in value])
    if isinstance(value, dict) and "status" in value:
      return cls(str(value["status"]), str(value.get("reason", "")))
    raise support.InvalidArgumentError(
        f"a capability verdict is a status string, [status, reason] or "
        f"{{'status': ..., 'reason': ...}}, got {value!r}")


OK = Verdict(SUPPORTED)


def worst(verdicts: Iterable[Verdict]) -> Verdict:
  """The least supported of `verdicts` (OK for none)."""
  result = OK
  for v in verdicts:
    if _RANK[v.status] > _RANK[result.status]:
      result = v
  return result


# Checks an op beyond its name; None when it has nothing to add.
OpCheck = Callable[[core.Operation], Optional[Verdict]]


@dataclasses.dataclass
class CapabilityTable:
  """What one backend supports.

  Attributes:
    name: the source's name (shown in reports).
    ops: op name -> verdict for the op with supported types.
    unknown_op: the verdict for an op not in `ops`.
    element_types: element-type spelling ("f32", "ui8", "complex<f32>",
      "f8E4M3FN", QUANTIZED, QUANTIZED_PER_AXIS) -> verdict; element types
      not listed are supported.
    dynamic_shapes: the verdict for a tensor with a dynamic dimension or no
      rank.
    custom_call_targets: the custom_call targets the backend has, or a
      zero-argument function returning them (read at query time, so later
      registrations count); None when unknown.
    unknown_custom_call: the verdict for a target not among them (or any
      target when they are unknown).
    op_checks: op name -> extra check of one op (its attributes); not
      serialized.
  """

  name: str
  ops: dict[str, Verdict] = dataclasses.field(default_factory=dict)
  unknown_op: Verdict = Verdict(UNSUPPORTED, "not an op this backend knows")
  element_types: dict[str, Verdict] = dataclasses.field(default_factory=dict)
  dynamic_shapes: Verdict = Verdict(
      MAYBE, "dynamic dimensions are only known at run time")
  custom_call_targets: (Collection[str] | Callable[[], Collection[str]] |
                        None) = None
  unknown_custom_call: Verdict = Verdict(
      MAYBE, "support depends on the custom_call targets registered with "
      "the backend at run time")
  op_checks: dict[str, OpCheck] = dataclasses.field(default_factory=dict)

  def targets(self) -> Optional[frozenset[str]]:
    targets = self.custom_call_targets
    if callable(targets):
      targets = targets()
    return frozenset(targets) if targets is not None else None

  def op_verdict(self, name: str) -> Verdict:
    return self.ops.get(name, self.unknown_op)

  # -- JSON. -----------------------------------------------------------------

  def to_json(self) -> dict[str, Any]:
    targets = self.targets()
    return {
        "name": self.name,
        "ops": {k: v.to_json() for k, v in sorted(self.ops.items())},
        "unknown_op": self.unknown_op.to_json(),
        "element_types": {k: v.to_json()
                          for k, v in sorted(self.element_types.items())},
        "dynamic_shapes": self.dynamic_shapes.to_json(),
        "custom_call_targets": (sorted(targets) if targets is not None
                                else None),
        "unknown_custom_call": self.unknown_custom_call.to_json(),
    }

  @classmethod
  def from_json(cls, data: Any) -> "CapabilityTable":
    """A table from `to_json()`'s form (a dict, or its JSON text).

    Missing keys take the defaults; op checks cannot be given in JSON.

    Raises:
      support.InvalidArgumentError: on a malformed table.
    """
    if isinstance(data, (str, bytes)):
      try:
        data = json.loads(data)
      except ValueError as e:
        raise support.InvalidArgumentError(
            f"capability table is not JSON: {e}") from e
    if not isinstance(data, dict):
      raise support.InvalidArgumentError(
          "a capability table is a JSON object")
    unknown = set(data) - {f.name for f in dataclasses.fields(cls)
                           if f.name != "op_checks"}
    if unknown:
      raise support.InvalidArgumentError(
          f"unknown capability table keys: {', '.join(sorted(unknown))}")
    table = cls(name=str(data.get("name", "table")))
    for key in ("ops", "element_types"):
      entries = data.get(key, {})
      if not isinstance(entries, dict):
        raise support.InvalidArgumentError(f"'{key}' must be an object")
      setattr(table, key,
              {str(k): Verdict.from_json(v) for k, v in entries.items()})
    for key in ("unknown_op", "dynamic_shapes", "unknown_custom_call"):
      if key in data:
        setattr(table, key, Verdict.from_json(data[key]))
    targets = data.get("custom_call_targets")
    if targets is not None:
      if not isinstance(targets, list):
        raise support.InvalidArgumentError(
            "'custom_call_targets' must be a list or null")
      table.custom_call_targets = frozenset(str(x) for x in targets)
    return table


def foreign_table(reason: str = NO_INFORMATION,
                  name: str = "unknown") -> CapabilityTable:
  """A table that knows nothing: every op (but the structural ones) "maybe"."""
  maybe = Verdict(MAYBE, reason)
  return CapabilityTable(
      name=name, ops={n: OK for n in STRUCTURAL_OPS}, unknown_op=maybe,
      dynamic_shapes=maybe, unknown_custom_call=maybe)


# --------------------------------------------------------------------------
# Reports.


@dataclasses.dataclass
class OpReport:
  """The verdict for every occurrence of one op name in a program.

  Attributes:
    name: the op name.
    status: the worst status over its occurrences.
    count: how many times the op occurs.
    reasons: the reasons of its non-supported occurrences, without repeats.
    locations: where the first few non-supported occurrences are.
  """

  name: str
  status: str
  count: int = 0
  reasons: list[str] = dataclasses.field(default_factory=list)
  locations: list[str] = dataclasses.field(default_factory=list)

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass
class CapabilityReport:
  """Per-op verdicts of one program against one table."""

  source: str
  ops: list[OpReport]

  @property
  def status(self) -> str:
    return worst(Verdict(o.status) for o in self.ops).status

  @property
  def supported(self) -> bool:
    return self.status == SUPPORTED

  def with_status(self, status: str) -> list[OpReport]:
    return [o for o in self.ops if o.status == status]

  def counts(self) -> dict[str, int]:
    """status -> number of op names with it."""
    return {s: len(self.with_status(s)) for s in STATUSES}

  def summary(self) -> str:
    counts = self.counts()
    total = sum(o.count for o in self.ops)
    return (f"{len(self.ops)} op kinds ({total} ops) against "
            f"'{self.source}': {counts[SUPPORTED]} supported, "
            f"{counts[MAYBE]} maybe, {counts[UNSUPPORTED]} unsupported -> "
            f"{self.status}")

  def format_table(self) -> str:
    """An aligned text table, one op per line, then the summary."""
    width = max([len("op")] + [len(o.name) for o in self.ops])
    lines = [f"{'op':<{width}}  {'count':>5}  {'status':<11}  reason"]
    for o in self.ops:
      reason = "; ".join(o.reasons)
      if o.locations:
        reason += f" (at {', '.join(o.locations)})"
      lines.append(f"{o.name:<{width}}  {o.count:>5}  {o.status:<11}  "
                   f"{reason}".rstrip())
    lines.append(self.summary())
    return "\n".join(lines)

  def to_json(self) -> dict[str, Any]:
    return {"source": self.source, "status": self.status,
            "counts": self.counts(),
            "ops": [o.to_json() for o in self.ops]}


# --------------------------------------------------------------------------
# Programs.


def load_program(program: Any, filename: str = "<program>") -> core.Module:
  """A parsed module from MLIR text, a portable artifact or a Module.

  Raises:
    support.InvalidArgumentError: text that does not parse, bytes that are
      neither UTF-8 text nor MLIR bytecode, or another type.
    support.DataLossError / UnimplementedError: a malformed or unsupported
      portable artifact (the deserializer's errors).
  """
  if isinstance(program, core.Module):
    return program
  if isinstance(program, (bytes, bytearray, memoryview)):
    data = bytes(program)
    if bytecode_reader.is_bytecode(data):
      return portable.deserialize_portable_artifact(data)
    try:
      program = data.decode("utf-8")
    except UnicodeDecodeError as e:
      raise support.InvalidArgumentError(
          f"{filename}: neither MLIR bytecode nor UTF-8 MLIR text") from e
  if isinstance(program, str):
    return mlir_text.parse_module(program, filename)
  raise support.InvalidArgumentError(
      f"cannot read a program from a {type(program).__name__}: pass MLIR "
      "text, a portable artifact (bytes) or a parsed Module")


def element_type_key(et: t.Type) -> str:
  """The `CapabilityTable.element_types` key of an element type."""
  if isinstance(et, t.QuantizedType):
    return QUANTIZED_PER_AXIS if et.is_per_axis else QUANTIZED
  return typeutil.fmt_elem(et)


def _type_verdicts(ty: t.Type, table: CapabilityTable,
                   out: list[Verdict]) -> None:
  if isinstance(ty, t.TupleType):
    for inner in ty.types:
      _type_verdicts(inner, table, out)
    return
  if isinstance(ty, t.UnrankedTensorType):
    out.append(dataclasses.replace(
        table.dynamic_shapes,
        reason=_join("unranked tensor", table.dynamic_shapes.reason)))
  elif isinstance(ty, t.RankedTensorType) and not ty.has_static_shape:
    out.append(dataclasses.replace(
        table.dynamic_shapes,
        reason=_join("dynamic dimensions", table.dynamic_shapes.reason)))
  et = t.element_type_of(ty)
  keys = [element_type_key(et)]
  if isinstance(et, t.ComplexType):
    keys.append(element_type_key(et.element_type))
  for key in keys:
    v = table.element_types.get(key)
    if v is not None and v.status != SUPPORTED:
      out.append(dataclasses.replace(
          v, reason=_join(f"element type {key}", v.reason)))


def _join(what: str, reason: str) -> str:
  return f"{what}: {reason}" if reason else what


def _custom_call_verdict(op: core.Operation, table: CapabilityTable,
                         targets: Optional[frozenset[str]]) -> Verdict:
  target = op.attr("call_target_name")
  name = target.value if isinstance(target, a.StringAttr) else "?"
  if targets is not None and name in targets:
    return OK
  v = table.unknown_custom_call
  if v.status == SUPPORTED:
    return v
  return dataclasses.replace(
      v, reason=_join(f"custom_call target '{name}'", v.reason))


def _location(op: core.Operation) -> str:
  loc = op.location
  line = getattr(loc, "line", None)
  if line is None:
    return ""
  filename = getattr(loc, "filename", "") or ""
  if not filename or filename.startswith("<"):
    return f"line {line}"
  return f"{filename}:{line}"


def _cached_type_verdicts(ty: t.Type, table: CapabilityTable,
                          cache: dict[Any, list[Verdict]] | None,
                          out: list[Verdict]) -> None:
  """`_type_verdicts`, remembered per type (types are values; a program
  repeats a few of them many times)."""
  if cache is None:
    _type_verdicts(ty, table, out)
    return
  try:
    found = cache.get(ty)
  except TypeError:  # An unhashable encoding attribute.
    _type_verdicts(ty, table, out)
    return
  if found is None:
    found = cache[ty] = []
    _type_verdicts(ty, table, found)
  out.extend(found)


def op_verdict(op: core.Operation, table: CapabilityTable,
               targets: Optional[frozenset[str]] = None,
               type_cache: dict[Any, list[Verdict]] | None = None) -> Verdict:
  """The verdict for one op: its name, its types and its attributes.

  Of several problems, the worst is returned (its reason names it).
  """
  verdicts = [table.op_verdict(op.name)]
  if op.name == "stablehlo.custom_call":
    verdicts.append(_custom_call_verdict(op, table, targets))
  check = table.op_checks.get(op.name)
  if check is not None:
    extra = check(op)
    if extra is not None:
      verdicts.append(extra)
  types = [v.type for v in op.operands] + [v.type for v in op.results]
  if op.name == "func.func" and op.regions and op.regions[0].blocks:
    types += [v.type for v in op.regions[0].blocks[0].arguments]
  for ty in types:
    _cached_type_verdicts(ty, table, type_cache, verdicts)
  return worst(verdicts)


_MAX_LOCATIONS = 3


def query(program: Any, table: CapabilityTable | None = None) -> (
    CapabilityReport):
  """The per-op capability of `program` against `table` (default:
  `default_table()`).

  Args:
    program: MLIR text, a portable artifact (bytes) or a parsed Module.
    table: what the backend supports.

  Raises:
    support.XlaError: the program cannot be read (see `load_program`).
  """
  module = load_program(program)
  table = table if table is not None else default_table()
  targets = table.targets()
  type_cache: dict[Any, list[Verdict]] = {}
  by_name: dict[str, OpReport] = {}
  for op in module.walk():
    verdict = op_verdict(op, table, targets, type_cache)
    report = by_name.get(op.name)
    if report is None:
      report = by_name[op.name] = OpReport(op.name, SUPPORTED)
    report.count += 1
    if verdict.status == SUPPORTED:
      continue
    if _RANK[verdict.status] > _RANK[report.status]:
      report.status = verdict.status
    if verdict.reason and verdict.reason not in report.reasons:
      report.reasons.append(verdict.reason)
    if len(report.locations) < _MAX_LOCATIONS:
      where = _location(op)
      if where and where not in report.locations:
        report.locations.append(where)
  ops = sorted(by_name.values(),
               key=lambda o: (-_RANK[o.status], o.name))
  return CapabilityReport(table.name, ops)


# --------------------------------------------------------------------------
# The interpreter's table.


def _interpreter_element_types() -> dict[str, Verdict]:
  """Element types the interpreter has no numpy representation for."""
  candidates = [t.FloatType(n) for n in t.FLOAT_TYPES]
  for width in t.INT_WIDTHS:
    candidates += [t.IntegerType(width), t.IntegerType(width, unsigned=True)]
  candidates += [t.ComplexType(t.f32), t.ComplexType(t.f64)]
  result = {}
  for et in candidates:
    if mlir_text.numpy_dtype(et) is None:
      result[element_type_key(et)] = Verdict(
          UNSUPPORTED, "the interpreter has no numpy representation for it")
  return result


def interpreter_table() -> CapabilityTable:
  """What the StableHLO reference interpreter runs, from the op registry."""
  # pylint: disable-next=g-import-not-at-top
  from stablehlo import interpreter  # Registers every kernel.
  # pylint: disable-next=g-import-not-at-top
  from stablehlo.interpreter import program as interpreter_program
  del interpreter
  ops = {}
  for d in registry.all_ops():
    if d.interpreter is not None or d.name in STRUCTURAL_OPS:
      ops[d.name] = OK
    else:
      ops[d.name] = Verdict(
          UNSUPPORTED, d.unsupported.get("interpreter") or
          "the interpreter has no kernel for it")
  return CapabilityTable(
      name="interpreter", ops=ops,
      unknown_op=Verdict(UNSUPPORTED, "not an op of the StableHLO registry"),
      element_types=_interpreter_element_types(),
      dynamic_shapes=Verdict(
          MAYBE, "the interpreter takes shapes from the arguments at run "
          "time; dynamic-shape ops are checked only then"),
      custom_call_targets=interpreter_program.custom_call_targets,
      unknown_custom_call=Verdict(
          MAYBE, "not registered with the interpreter now "
          "(stablehlo.interpreter.register_custom_call may add it before "
          "the run)"))


# --------------------------------------------------------------------------
# Tables from an HLO opcode coverage table (a compiler backend's).

# StableHLO op (without "stablehlo.") -> the HLO opcodes its lowering emits,
# where that is not the op name with '-' for '_' (XLA's HLO exporter).
STABLEHLO_TO_HLO: dict[str, tuple[str, ...]] = {
    "broadcast_in_dim": ("broadcast",),
    "dot_general": ("dot",),
    "if": ("conditional",),
    "case": ("conditional",),
    "create_token": ("after-all",),
    "optimization_barrier": ("opt-barrier",),
    "composite": ("call",),
}
# Ops outside the stablehlo dialect; () = no instruction of its own (globals
# become parameters and outputs of the entry computation).
_OTHER_TO_HLO: dict[str, tuple[str, ...]] = {
    "func.call": ("call",),
    "ml_program.global_load": (),
    "ml_program.global_load_const": (),
    "ml_program.global_store": (),
}

_CODEGEN_WORDS = {
    "codegen": SUPPORTED, "thunk": SUPPORTED, "supported": SUPPORTED,
    "yes": SUPPORTED, "ok": SUPPORTED, "library": SUPPORTED,
    "maybe": MAYBE, "partial": MAYBE,
    "unimplemented": UNSUPPORTED, "unsupported": UNSUPPORTED, "no": UNSUPPORTED,
}


def hlo_opcodes(op_name: str) -> tuple[str, ...]:
  """The HLO opcodes the StableHLO -> HLO import emits for `op_name`."""
  if op_name in _OTHER_TO_HLO:
    return _OTHER_TO_HLO[op_name]
  dialect, _, short = op_name.partition(".")
  if dialect != "stablehlo":
    return ()
  if short in STABLEHLO_TO_HLO:
    return STABLEHLO_TO_HLO[short]
  return (short.replace("_", "-"),)


def _coverage_verdict(entry: Any) -> Verdict:
  """One coverage-table entry (a status word, (status, reason), a dict or
  an object with `.status` / `.reason`) as a Verdict."""
  reason = ""
  if isinstance(entry, (tuple, list)):
    status, reason = (list(entry) + [""])[:2]
  elif isinstance(entry, dict):
    status, reason = entry.get("status"), entry.get("reason", "")
  elif isinstance(entry, str):
    status = entry
  else:
    status, reason = getattr(entry, "status", None), getattr(
        entry, "reason", "")
  if isinstance(status, enum.Enum):
    status = status.name
  word = str(status).lower()
  if word not in _CODEGEN_WORDS:
    raise support.InvalidArgumentError(
        f"unknown coverage status {status!r}")
  return Verdict(_CODEGEN_WORDS[word],
                 "" if _CODEGEN_WORDS[word] == SUPPORTED else str(reason or ""))


def _opcode_key(key: Any) -> str:
  if isinstance(key, enum.Enum) and isinstance(key.value, str):
    return key.value  # xla's HloOpcode: .value is the HLO text name.
  return str(key)


# Element types a codegen backend handles only in some kernels.
_NARROW_FLOATS = tuple(n for n in t.FLOAT_TYPES
                       if n.startswith(("f4E", "f6E", "f8E")))


def hlo_coverage_table(coverage: Mapping[Any, Any] | Iterable[Sequence[Any]],
                       *, name: str = "xla_cpu",
                       element_types: Mapping[str, Verdict] | None = None,
                       custom_call_targets: Any = None) -> CapabilityTable:
  """A table for a backend that compiles through HLO.

  An op is supported when the StableHLO -> HLO import has a lowering for it
  (read from the registry's `hlo_lowering` slot, when the importer was
  loaded) and every HLO opcode it lowers to is supported in `coverage`.

  Args:
    coverage: HLO opcode (text name, e.g. "add", "custom-call", or an
      HloOpcode) -> status: "codegen" / "thunk" (supported),
      "unimplemented" (unsupported), as a word, (word, reason), a dict or an
      object with `.status` / `.reason`; or rows (opcode, status, reason),
      the form of `xla.service.cpu.coverage.table()`.
    name: the table's name.
    element_types: overrides of the default element-type verdicts (f4 / f6 /
      f8 / tf32 and quantized types "maybe").
    custom_call_targets: the backend's custom_call targets, or a function
      returning them; None when unknown.
  """
  if not isinstance(coverage, Mapping):
    # Rows (opcode, status[, detail]), as xla.service.cpu.coverage.table().
    coverage = {row[0]: tuple(row[1:3]) for row in coverage}
  by_opcode = {_opcode_key(k): _coverage_verdict(v)
               for k, v in coverage.items()}
  lowerings_known = any(d.hlo_lowering is not None
                        for d in registry.all_ops())
  ops = {}
  for d in registry.all_ops():
    if d.name in STRUCTURAL_OPS:
      ops[d.name] = OK
      continue
    if lowerings_known and d.hlo_lowering is None:
      reason = d.unsupported.get("hlo_lowering", "")
      if d.dialect == "chlo":
        ops[d.name] = Verdict(
            MAYBE, "expanded by CHLO legalization before import; supported "
            "when the ops it expands to are")
      else:
        ops[d.name] = Verdict(UNSUPPORTED, _join(
            "no StableHLO -> HLO lowering", reason))
      continue
    if d.dialect == "chlo":
      ops[d.name] = Verdict(
          MAYBE, "expanded by CHLO legalization before import; supported "
          "when the ops it expands to are")
      continue
    if d.dialect in ("check", "interpreter"):
      ops[d.name] = Verdict(UNSUPPORTED, "interpreter-only op")
      continue
    verdicts = []
    for opcode in hlo_opcodes(d.name):
      v = by_opcode.get(opcode)
      if v is None:
        verdicts.append(Verdict(
            UNSUPPORTED, f"HLO {opcode}: not in the {name} coverage table"))
      elif v.status != SUPPORTED:
        verdicts.append(dataclasses.replace(
            v, reason=_join(f"HLO {opcode}", v.reason)))
    ops[d.name] = worst(verdicts)
  types = {n: Verdict(MAYBE, "only some kernels take it (widened to f32)")
           for n in _NARROW_FLOATS}
  types["tf32"] = Verdict(MAYBE, "only some kernels take it")
  quantized = Verdict(
      MAYBE, "the HLO import takes no quantized types; supported only when "
      "quantization is lowered to integer arithmetic first")
  types[QUANTIZED] = types[QUANTIZED_PER_AXIS] = quantized
  types.update(element_types or {})
  return CapabilityTable(
      name=name, ops=ops,
      unknown_op=Verdict(UNSUPPORTED, "not an op of the StableHLO registry"),
      element_types=types,
      dynamic_shapes=Verdict(
          MAYBE, "compiles only when the dimensions are refined to static "
          "ones first"),
      custom_call_targets=custom_call_targets)


# --------------------------------------------------------------------------
# Sources and plugins.

_sources: dict[str, Any] = {"interpreter": interpreter_table}
_built: dict[str, CapabilityTable] = {}
_plugin_bindings: dict[str, str] = {}
_lock = threading.RLock()


def register_source(name: str, table: CapabilityTable | Callable[
    [], CapabilityTable], *, replace: bool = False) -> None:
  """Registers a table (or a function building it on first use) as `name`.

  Raises:
    support.AlreadyExistsError: `name` is taken and `replace` is False.
  """
  with _lock:
    if name in _sources and not replace:
      raise support.AlreadyExistsError(
          f"a capability source named {name!r} is already registered")
    _sources[name] = table
    _built.pop(name, None)


def unregister_source(name: str) -> None:
  with _lock:
    _sources.pop(name, None)
    _built.pop(name, None)


def registered_sources() -> list[str]:
  with _lock:
    return sorted(_sources)


def source(name: str) -> CapabilityTable:
  """The table registered as `name` (built once).

  Raises:
    support.NotFoundError: no source of that name.
  """
  with _lock:
    table = _built.get(name)
    if table is not None:
      return table
    entry = _sources.get(name)
    if entry is None:
      raise support.NotFoundError(
          f"no capability source named {name!r} (registered: "
          f"{', '.join(sorted(_sources))})")
    table = entry if isinstance(entry, CapabilityTable) else entry()
    _built[name] = table
    return table


def default_table() -> CapabilityTable:
  """Our stack's table: the CPU backend's when registered, else the
  interpreter's."""
  with _lock:
    return source("xla_cpu" if "xla_cpu" in _sources else "interpreter")


def bind_plugin(plugin_name: str, source_name: str | None) -> None:
  """Answers queries for plugin `plugin_name` from source `source_name`
  (None removes the binding)."""
  with _lock:
    if source_name is None:
      _plugin_bindings.pop(plugin_name, None)
    else:
      _plugin_bindings[plugin_name] = source_name


def table_for_plugin(plugin: Any) -> CapabilityTable:
  """The table for a loaded plugin (`loader.Plugin`).

  From `bind_plugin`, else from the plugin attribute `capability_source`;
  a plugin with neither gets `foreign_table()` (every op "maybe").
  """
  with _lock:
    bound = _plugin_bindings.get(plugin.name)
  if bound is not None:
    return source(bound)
  try:
    named = plugin.attributes().get(PLUGIN_ATTRIBUTE)
  except support.XlaError:
    named = None
  if isinstance(named, str) and named:
    with _lock:
      known = named in _sources
    if known:
      return source(named)
    return foreign_table(
        f"the plugin names capability source {named!r}, which is not "
        "registered in this process", name=named)
  return foreign_table(name=plugin.name)
