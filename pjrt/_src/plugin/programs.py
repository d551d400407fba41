"""Programs a client compiles: formats, parsing, verification, signatures.

A PJRT_Program in format "mlir" is a StableHLO portable artifact (VHLO
bytecode, possibly with Shardy annotations; what JAX sends, see shardy.py)
or StableHLO MLIR text. Plain, non-VHLO MLIR bytecode is not supported
(UNIMPLEMENTED), nor are the serialized HloModuleProto formats "hlo" /
"hlo_with_config". Every program is verified before anything compiles it,
and its entry function, @main (as XLA requires), must have static shapes and
array types only.

`Program` keeps the original bytes: backends that rewrite the module in
place get a fresh copy from them (`fresh_module`), and serialized
executables store them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Optional

import numpy as np

import support
from pjrt._src import abi_types
from pjrt._src import dtypes
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t

FORMAT_MLIR = "mlir"
HLO_FORMATS = ("hlo", "hlo_with_config")

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
  module: core.Module
  entry: str
  name: str
  parameters: list[ArrayType]
  results: list[ArrayType]
  # Parameter index -> result index it may be aliased with (donation).
  aliases: dict[int, int]
  # Parameters donated without a particular result (jax.buffer_donor).
  donors: frozenset[int]
  uses_collectives: bool

  @property
  def fingerprint(self) -> str:
    return hashlib.sha256(self.format.encode() + b"\0" + self.code).hexdigest()

  def donatable(self) -> frozenset[int]:
    return frozenset(self.aliases) | self.donors

  def fresh_module(self) -> core.Module:
    """A new copy of the module (for passes that rewrite in place)."""
    return parse(self.code, self.format)

  def text(self) -> str:
    from stablehlo._src import text as mlir_text  # pylint: disable=g-import-not-at-top
    return mlir_text.print_module(self.module)


def parse(code: bytes, fmt: str) -> core.Module:
  """The verified StableHLO module of program `code` in format `fmt`.

  Raises:
    support.InvalidArgumentError: an unknown format, or a program that does
      not parse or verify.
    support.UnimplementedError: a format or encoding we do not read.
  """
  if fmt in HLO_FORMATS:
    raise support.UnimplementedError(
        f"program format {fmt!r} (a serialized HloModuleProto) is not "
        "supported by the openxla_cpu plugin; pass StableHLO as format "
        "'mlir' (a portable artifact or MLIR text)")
  if fmt != FORMAT_MLIR:
    raise support.InvalidArgumentError(
        f"unknown program format {fmt!r}; the openxla_cpu plugin takes "
        "'mlir' (StableHLO portable artifact or MLIR text)")
  from stablehlo._src.bytecode import reader  # pylint: disable=g-import-not-at-top
  from stablehlo._src.ops import verify  # pylint: disable=g-import-not-at-top
  if reader.is_bytecode(code):
    from pjrt._src.plugin import shardy  # pylint: disable=g-import-not-at-top
    module = shardy.deserialize(code)
  else:
    try:
      text = code.decode("utf-8")
    except UnicodeDecodeError as e:
      raise support.InvalidArgumentError(
          "the program is neither MLIR bytecode nor UTF-8 MLIR text "
          f"({e})") from None
    from stablehlo._src import text as mlir_text  # pylint: disable=g-import-not-at-top
    module = mlir_text.parse_module(text, "<program>")
  verify.verify_module(module)
  return module


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
  """The ArrayType of a tensor type of the entry's signature."""
  if not isinstance(ty, t.RankedTensorType):
    raise support.UnimplementedError(
        f"{what} has type {ty}; the openxla_cpu plugin supports ranked "
        "tensors only (no tokens, tuples or unranked tensors)")
  if not ty.has_static_shape:
    raise support.UnimplementedError(
        f"{what} has dynamic shape {ty}; only static shapes are supported")
  element = ty.element_type
  if isinstance(element, t.QuantizedType):
    raise support.UnimplementedError(
        f"{what} has quantized type {ty}, which a buffer cannot hold")
  from stablehlo._src.interpreter import runtime  # pylint: disable=g-import-not-at-top
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


def load(code: bytes, fmt: str) -> Program:
  """Parses, verifies and describes program `code` (see `parse`)."""
  module = parse(code, fmt)
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
                 uses_collectives=uses_collectives)
