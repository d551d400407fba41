"""Programs a client compiles: formats, parsing, verification, signatures.

A PJRT_Program in format "mlir" is a StableHLO portable artifact (VHLO
bytecode, possibly with Shardy annotations; what JAX sends, see shardy.py)
or StableHLO MLIR text. Plain, non-VHLO MLIR bytecode is not supported
(UNIMPLEMENTED). Every program is verified before anything compiles it,
and its entry function, @main (as XLA requires), must have static shapes and
array types only.

Format "hlo" is a serialized xla.HloModuleProto, "hlo_with_config" an
xla.HloModuleProtoWithConfig (field 1: the HloModuleProto, field 2: an
HloModuleConfigProto, which is not read: compile options say the replica
and partition counts). This module may not import //xla (see
ci/layering), so the HLO module is read by the function that backends.py
registers with `register_hlo_reader`; such a Program has `hlo` set (an
HloModule, opaque here) and `module` None. Only the XLA backends (cpu,
evaluator) run it.

`Program` keeps the original bytes: backends that rewrite the module in
place get a fresh copy from them (`fresh_module`, `fresh_hlo`), and
serialized executables store them. The first such backend takes the module
`load` parsed instead (`take_module`: a second parse of a large program
cost as much as its first); `stablehlo()` parses it again for any later
reader.

`Program.shardings` says what makes a program *global* (to be partitioned
when compiled for several partitions): Shardy or `mhlo.sharding`
annotations that are not fully replicated, Shardy ops other than the mesh,
and the SPMD custom calls (`Sharding`, `SPMDFullToShardShape`,
`SPMDShardToFullShape`); found before shardy.py strips the annotations.
A program loaded with `keep_shardy` (one compiled for several partitions)
keeps its Shardy ops and attributes: the HLO import converts them into
the HLO shardings the partitioner reads. Only a program of one partition
has them stripped (it has nothing to partition).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable, Optional

import numpy as np

import support
from pjrt._src import abi_types
from pjrt._src import compile_options as proto_wire
from pjrt._src import dtypes
from stablehlo import attributes as a
from stablehlo import ir as core
from stablehlo import types as t

FORMAT_MLIR = "mlir"
FORMAT_HLO = "hlo"
FORMAT_HLO_WITH_CONFIG = "hlo_with_config"
HLO_FORMATS = (FORMAT_HLO, FORMAT_HLO_WITH_CONFIG)
# HloModuleProtoWithConfig.hlo_module (xla/xla.proto).
_WITH_CONFIG_HLO_MODULE_FIELD = 1
_WIRE_LEN = 2

# Ops that make replicas (or partitions) of one execution interact, or
# depend on which process they run in.
COLLECTIVE_OPS = frozenset({
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
    "stablehlo.reduce_scatter", "stablehlo.collective_permute",
    "stablehlo.collective_broadcast", "stablehlo.replica_id",
    "stablehlo.partition_id", "stablehlo.send", "stablehlo.recv",
})


@dataclasses.dataclass(frozen=True)
class ArrayType:
  """A parameter or result of the entry: element type and static shape."""

  element_type: abi_types.BufferType
  dtype: np.dtype
  shape: tuple[int, ...]

  def describe(self) -> str:
    return f"{self.element_type.name}{list(self.shape)}"


@dataclasses.dataclass
class Program:
  """A parsed, verified program and what the runtime needs to know of it."""

  code: bytes
  format: str
  # The StableHLO module; None for a program in an HLO format.
  module: Optional[core.Module]
  entry: str
  name: str
  parameters: list[ArrayType]
  results: list[ArrayType]
  # Parameter index -> result index it may be aliased with (donation).
  aliases: dict[int, int]
  # Parameters donated without a particular result (jax.buffer_donor).
  donors: frozenset[int]
  uses_collectives: bool
  # The HloModule of a program in an HLO format (see `register_hlo_reader`).
  hlo: Any = None
  # `module` was handed to a consumer that rewrites it (`take_module`).
  taken: bool = False
  # What makes the program global (see the module docstring): short
  # descriptions, empty for a per-device program.
  shardings: tuple[str, ...] = ()
  # The module keeps its Shardy ops and attributes (see `load`).
  keep_shardy: bool = False

  @property
  def is_hlo(self) -> bool:
    return self.format in HLO_FORMATS

  @property
  def fingerprint(self) -> str:
    return hashlib.sha256(self.format.encode() + b"\0" + self.code).hexdigest()

  def donatable(self) -> frozenset[int]:
    return frozenset(self.aliases) | self.donors

  def fresh_module(self) -> core.Module:
    """A new copy of the module (for passes that rewrite in place)."""
    if self.is_hlo:
      raise support.UnimplementedError(
          f"program {self.name!r} is HLO (format {self.format!r}), not "
          "StableHLO; only the cpu and evaluator backends run it")
    return parse(self.code, self.format, keep_shardy=self.keep_shardy)

  def take_module(self) -> core.Module:
    """The module for a consumer that rewrites it in place: the one `load`
    parsed if nobody took it yet (this Program then parses again on
    demand, see `stablehlo`), else a fresh copy."""
    if self.taken or self.module is None:
      return self.fresh_module()
    module, self.module, self.taken = self.module, None, True
    return module

  def stablehlo(self) -> core.Module:
    """The (unmodified) StableHLO module, parsed again if it was taken."""
    if self.module is None:
      self.module = self.fresh_module()
      self.taken = False
    return self.module

  def fresh_hlo(self) -> Any:
    """A new copy of the HloModule of an HLO-format program."""
    if not self.is_hlo:
      raise support.InvalidArgumentError(
          f"program {self.name!r} is StableHLO, not HLO")
    return read_hlo(self.code, self.format).module

  def text(self) -> str:
    if self.is_hlo:
      return self.hlo.to_string()
    from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
    # Printed from a module that is not kept: a cached one would stay
    # alive as long as the executable (jaxlib asks for the text of every
    # program it compiles, to read its layouts).
    module = self.module if self.module is not None else self.fresh_module()
    return mlir_text.print_module(module)


def parse(code: bytes, fmt: str, *, keep_shardy: bool = False
          ) -> core.Module:
  """The verified StableHLO module of program `code` in format `fmt`,
  without its Shardy ops and attributes unless `keep_shardy`.

  Raises:
    support.InvalidArgumentError: an unknown format, or a program that does
      not parse or verify.
    support.UnimplementedError: a format or encoding we do not read.
  """
  return parse_with_shardings(code, fmt, keep_shardy=keep_shardy)[0]


_SPMD_CUSTOM_CALLS = frozenset({"Sharding", "SPMDFullToShardShape",
                                "SPMDShardToFullShape"})
# Shardy ops that say nothing about how values are split.
_NEUTRAL_SDY_OPS = frozenset({"sdy.mesh"})


def _split_shardings(attr, key: str = ""):
  """Descriptions of the shardings nested in `attr` (under dictionary key
  `key`) that split a value: Shardy shardings that are not fully
  replicated, and `mhlo.sharding` strings other than "{replicated}"."""
  from stablehlo import sdy  # pylint: disable=g-import-not-at-top
  if isinstance(attr, sdy.TensorShardingPerValue):
    for x in attr.shardings:
      yield from _split_shardings(x)
  elif isinstance(attr, sdy.TensorSharding):
    if not attr.is_fully_replicated():
      yield str(attr)
  elif isinstance(attr, a.OpaqueAttr) and attr.text.startswith(
      "#sdy.sharding"):
    yield attr.text  # Not read into a value: taken as splitting.
  elif isinstance(attr, a.StringAttr) and key == "mhlo.sharding":
    if attr.value.strip() != "{replicated}":
      yield f"mhlo.sharding = {attr.value.strip()}"
  elif isinstance(attr, a.DictionaryAttr):
    for k, v in attr.entries:
      yield from _split_shardings(v, k)
  elif isinstance(attr, a.ArrayAttr):
    for v in attr.elements:
      yield from _split_shardings(v, key)


def global_shardings(module: core.Module) -> tuple[str, ...]:
  """What makes `module` a global program (see the module docstring)."""
  found = []
  for op in module.walk():
    splits = [f"{op.name} {x}" for table in (op.attributes, op.properties)
              for k, v in table.items() for x in _split_shardings(v, k)]
    found.extend(splits)
    if (op.dialect == "sdy" and op.name not in _NEUTRAL_SDY_OPS and
        not (op.name == "sdy.sharding_constraint" and not splits)):
      found.append(op.name)
    if op.name == "stablehlo.custom_call":
      target = getattr(op.attr("call_target_name"), "value", None)
      if target in _SPMD_CUSTOM_CALLS:
        found.append(f"custom_call @{target}")
  return tuple(dict.fromkeys(found))


def parse_with_shardings(code: bytes, fmt: str, *, keep_shardy: bool = False
                         ) -> tuple[core.Module, tuple[str, ...]]:
  """`parse`, and what made the program global before its Shardy
  annotations were stripped (`global_shardings`)."""
  if fmt in HLO_FORMATS:
    raise support.InvalidArgumentError(
        f"program format {fmt!r} is HLO, not StableHLO (use `load` or "
        "`read_hlo`)")
  if fmt != FORMAT_MLIR:
    raise support.InvalidArgumentError(
        f"unknown program format {fmt!r}; the openxla_cpu plugin takes "
        "'mlir' (StableHLO portable artifact or MLIR text), 'hlo' "
        "(HloModuleProto) or 'hlo_with_config' (HloModuleProtoWithConfig)")
  from stablehlo.bytecode import reader  # pylint: disable=g-import-not-at-top
  from stablehlo import verify  # pylint: disable=g-import-not-at-top
  if reader.is_bytecode(code):
    from pjrt._src.plugin import shardy  # pylint: disable=g-import-not-at-top
    from stablehlo import vhlo  # pylint: disable=g-import-not-at-top
    module = vhlo.deserialize_portable_artifact(bytes(code))
    shardings = global_shardings(module)
    if not keep_shardy:
      shardy.strip(module)
  else:
    try:
      text = code.decode("utf-8")
    except UnicodeDecodeError as e:
      raise support.InvalidArgumentError(
          "the program is neither MLIR bytecode nor UTF-8 MLIR text "
          f"({e})") from None
    from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
    module = mlir_text.parse_module(text, "<program>")
    shardings = global_shardings(module)
  verify.verify_module(module)
  return module, shardings


# --------------------------------------------------------------------------
# HLO formats.


@dataclasses.dataclass
class HloInfo:
  """What a registered HLO reader says of a serialized HloModuleProto."""

  module: Any  # The verified HloModule.
  name: str
  entry: str  # The entry computation's name.
  # (numpy dtype, shape) of each entry parameter and result (a tuple root
  # gives one result per element).
  parameters: list[tuple[np.dtype, tuple[int, ...]]]
  results: list[tuple[np.dtype, tuple[int, ...]]]
  aliases: dict[int, int]
  donors: frozenset[int]
  uses_collectives: bool
  # What makes it a global program (see the module docstring).
  shardings: tuple[str, ...] = ()


HloReader = Callable[[bytes], HloInfo]
_hlo_reader: Optional[HloReader] = None


def register_hlo_reader(reader: Optional[HloReader]) -> None:
  """Sets the function that reads HloModuleProto bytes (None: unset).

  It raises support.InvalidArgumentError for bytes that are no valid HLO
  module and support.UnimplementedError for one it cannot run.
  """
  global _hlo_reader
  _hlo_reader = reader


def hlo_module_proto(code: bytes, fmt: str) -> bytes:
  """The serialized HloModuleProto of a program in format `fmt`.

  For "hlo_with_config", the HloModuleProtoWithConfig's hlo_module field
  (several occurrences of a message field merge, which for serialized bytes
  is their concatenation).

  Raises:
    support.InvalidArgumentError: malformed bytes, or no hlo_module.
  """
  if fmt == FORMAT_HLO:
    return bytes(code)
  if fmt != FORMAT_HLO_WITH_CONFIG:
    raise support.InvalidArgumentError(f"{fmt!r} is not an HLO format")
  parts = []
  try:
    for field, wire, value in proto_wire.iter_fields(bytes(code)):
      if field == _WITH_CONFIG_HLO_MODULE_FIELD:
        if wire != _WIRE_LEN:
          raise support.InvalidArgumentError(
              "HloModuleProtoWithConfig.hlo_module has wire type "
              f"{wire}, not a message")
        parts.append(value)
  except support.DataLossError as e:
    raise support.InvalidArgumentError(
        f"malformed HloModuleProtoWithConfig bytes: {e}") from None
  if not parts:
    raise support.InvalidArgumentError(
        "the HloModuleProtoWithConfig has no hlo_module")
  return b"".join(parts)


def read_hlo(code: bytes, fmt: str) -> HloInfo:
  """Reads and verifies an HLO-format program with the registered reader."""
  proto = hlo_module_proto(code, fmt)
  if _hlo_reader is None:
    raise support.UnimplementedError(
        f"program format {fmt!r} needs the plugin's HLO reader, which "
        "registers when pjrt._src.plugin.backends is imported")
  return _hlo_reader(proto)


def _load_hlo(code: bytes, fmt: str) -> Program:
  info = read_hlo(code, fmt)

  def array(spec, what):
    dtype, shape = spec
    try:
      element_type = dtypes.buffer_type(np.dtype(dtype))
    except support.InvalidArgumentError:
      raise support.UnimplementedError(
          f"{what} has dtype {dtype}, which has no PJRT buffer type"
      ) from None
    return ArrayType(element_type, np.dtype(dtype),
                     tuple(int(d) for d in shape))

  parameters = [array(p, f"parameter {i} of {info.entry}")
                for i, p in enumerate(info.parameters)]
  results = [array(r, f"result {i} of {info.entry}")
             for i, r in enumerate(info.results)]
  return Program(code=bytes(code), format=fmt, module=None, entry=info.entry,
                 name=info.name, parameters=parameters, results=results,
                 aliases=dict(info.aliases), donors=frozenset(info.donors),
                 uses_collectives=info.uses_collectives, hlo=info.module,
                 shardings=tuple(info.shardings))


# --------------------------------------------------------------------------
# StableHLO.


def entry_function(module: core.Module) -> core.Operation:
  """The entry function: @main, as XLA requires of a PJRT program."""
  main = module.lookup("main")
  if main is not None and main.name == "func.func" and main.regions and (
      main.regions[0].blocks):
    return main
  names = ", ".join("@" + f.attr("sym_name").value for f in module.functions)
  raise support.InvalidArgumentError(
      f"the program has no @main function to run (functions: "
      f"{names or 'none'})")


def array_type(ty: t.Type, what: str) -> ArrayType:
  """The ArrayType of a tensor or token type of the entry's signature (a
  token is a TOKEN buffer of shape [], which holds no data)."""
  if isinstance(ty, t.TokenType):
    return ArrayType(abi_types.BufferType.TOKEN, dtypes.TOKEN_STORAGE, ())
  if not isinstance(ty, t.RankedTensorType):
    raise support.UnimplementedError(
        f"{what} has type {ty}; the openxla_cpu plugin supports ranked "
        "tensors and tokens only (no tuples or unranked tensors)")
  if not ty.has_static_shape:
    raise support.UnimplementedError(
        f"{what} has dynamic shape {ty}; only static shapes are supported")
  element = ty.element_type
  if isinstance(element, t.QuantizedType):
    raise support.UnimplementedError(
        f"{what} has quantized type {ty}, which a buffer cannot hold")
  from stablehlo.interpreter import runtime  # pylint: disable=g-import-not-at-top
  dtype = runtime.numpy_dtype(ty)
  try:
    element_type = dtypes.buffer_type(dtype)
  except support.InvalidArgumentError:
    raise support.UnimplementedError(
        f"{what} has element type {element}, which has no PJRT buffer "
        "type") from None
  return ArrayType(element_type, dtype, tuple(int(d) for d in ty.shape))


def _arg_attrs(fn: core.Operation, count: int) -> list[dict[str, object]]:
  attrs = fn.attr("arg_attrs")
  result: list[dict[str, object]] = [{} for _ in range(count)]
  if isinstance(attrs, a.ArrayAttr):
    for i, entry in enumerate(attrs.elements[:count]):
      if isinstance(entry, a.DictionaryAttr):
        result[i] = dict(entry.entries)
  return result


def _int_value(attr) -> Optional[int]:
  value = getattr(attr, "value", None)
  return int(value) if isinstance(value, (int, np.integer)) else None


def load(code: bytes, fmt: str, *, keep_shardy: bool = False) -> Program:
  """Parses, verifies and describes program `code` (see `parse`; an HLO
  format goes through the registered HLO reader). With `keep_shardy` (a
  program compiled for several partitions) its Shardy ops and attributes
  stay."""
  if fmt in HLO_FORMATS:
    return _load_hlo(code, fmt)
  module, shardings = parse_with_shardings(code, fmt, keep_shardy=keep_shardy)
  fn = entry_function(module)
  entry = fn.attr("sym_name").value
  ftype = fn.attr("function_type")
  ftype = getattr(ftype, "value", ftype)
  parameters = [array_type(ty, f"parameter {i} of @{entry}")
                for i, ty in enumerate(ftype.inputs)]
  results = [array_type(ty, f"result {i} of @{entry}")
             for i, ty in enumerate(ftype.results)]
  aliases: dict[int, int] = {}
  donors = set()
  for i, attrs in enumerate(_arg_attrs(fn, len(parameters))):
    output = _int_value(attrs.get("tf.aliasing_output"))
    if output is not None and 0 <= output < len(results):
      aliases[i] = output
    donor = attrs.get("jax.buffer_donor")
    if isinstance(donor, a.BoolAttr) and donor.value:
      donors.add(i)
  name = "main"
  sym = module.op.attr("sym_name")
  if isinstance(sym, a.StringAttr) and sym.value:
    name = sym.value
  uses_collectives = any(op.name in COLLECTIVE_OPS for op in module.walk())
  return Program(code=bytes(code), format=fmt, module=module, entry=entry,
                 name=name, parameters=parameters, results=results,
                 aliases=aliases, donors=frozenset(donors),
                 uses_collectives=uses_collectives, shardings=shardings,
                 keep_shardy=keep_shardy)
