"""Portable artifacts: serialize / deserialize StableHLO modules.

    data = serialize_portable_artifact(module, "1.15.0")
    module = deserialize_portable_artifact(data)

Serializing is StableHLO -> VHLO (current ops) -> VHLO ops of the target
version -> MLIR bytecode in the format version the target implies, with the
producer `StableHLO_v<target>`. Deserializing reads the bytecode, upgrades
every VHLO op to the current version and converts back to StableHLO. Errors
on bad input are `support` errors (`InvalidArgumentError`,
`DataLossError`, `UnimplementedError`), never other exceptions.
"""

from __future__ import annotations

import support
from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import writer
from stablehlo._src.ir import core
from stablehlo._src.vhlo import builtin_conversion as bc
from stablehlo._src.vhlo import extern_constants
from stablehlo._src.vhlo import legalize
from stablehlo._src.vhlo import ops
from stablehlo._src.vhlo import unlegalize
from stablehlo._src.vhlo import use_lists
from stablehlo._src.vhlo import version as v
from stablehlo._src.vhlo import versioning
from stablehlo._src.vhlo import vhlo_ir


def _guard(fn, what: str):
  """Runs fn(); anything but a support error becomes an InternalError.

  The cyclic collector is paused meanwhile: a conversion allocates many
  small objects that live until it ends, and the collections they trigger
  walk the caller's whole heap (a third of deserialize time in the
  throughput benchmark's process).
  """
  try:
    with support.heap.gc_paused():
      return fn()
  except support.XlaError:
    raise
  except RecursionError as e:
    raise support.InvalidArgumentError(f"{what}: nesting too deep") from e
  except Exception as e:  # pylint: disable=broad-except
    raise support.InternalError(f"{what}: unexpected {type(e).__name__}: "
                                f"{e}") from e


def _strip_locations(root: vhlo_ir.VhloOp) -> None:
  for op in root.walk():
    op.location = bc.UNKNOWN_LOC
    for region in op.regions:
      for block in region.blocks:
        for arg in block.args:
          arg.loc = bc.UNKNOWN_LOC


def module_to_vhlo(module: core.Module, target="current",
                   strip_debuginfo: bool = False,
                   producer_version=None) -> vhlo_ir.VhloOp:
  """The VHLO op tree of `module` at `target` (before bytecode).

  `producer_version` (default: current) is the StableHLO version whose
  serializer the use-list order records imitate: an op counts as rewritten
  by the version conversion only if that producer would have had to
  downgrade it (e.g. jaxlib 0.10.2 is 1.17.0, whose newest custom_call is
  v1).
  """
  target = v.resolve_target(target)
  producer = (v.CURRENT if producer_version is None
              else v.Version.parse(producer_version))

  def run():
    root, has_casts = legalize.legalize_module(module)
    if target.without_patch() == v.CURRENT.without_patch():
      # Legalization makes current ops, which the current version takes
      # as they are (to_version would walk them all to find that).
      rewritten = []
    else:
      rewritten = versioning.to_version(root, target)
    rewritten = [op for op in rewritten
                 if ops.for_target(op.definition.base, producer) is not
                 op.definition]
    if rewritten or has_casts:
      use_lists.assign(root, rewritten)
    # Else every use was made in pre-order: no value needs a use-list
    # order record, and the new tree holds none (use_lists.assign would
    # walk it to find that).
    if strip_debuginfo:
      _strip_locations(root)
    return root

  return _guard(run, "serialize_portable_artifact")


def serialize_portable_artifact(module: core.Module, target: str,
                                *, strip_debuginfo: bool = False,
                                producer_version=None,
                                externalize_threshold_bytes=None,
                                sidecar_path=None) -> bytes:
  """A portable artifact of `module` loadable by StableHLO >= `target`.

  `target` is `X.Y.Z` within [get_minimum_version(), get_current_version()]
  (or "current" / "minimum"). `strip_debuginfo` writes every location as
  unknown (what `stablehlo-translate --strip-debuginfo` does). Raises
  `versioning.UnsupportedAtTargetError` (an InvalidArgumentError) when the
  module uses features newer than `target`. With
  `externalize_threshold_bytes` and `sidecar_path`, constants larger than
  the threshold go to the sidecar file (see extern_constants.py).
  """
  if externalize_threshold_bytes is not None or sidecar_path is not None:
    if externalize_threshold_bytes is None or sidecar_path is None:
      raise support.InvalidArgumentError(
          "externalize_threshold_bytes and sidecar_path go together")
  with support.heap.gc_paused():
    return _serialize(module, target, strip_debuginfo, producer_version,
                      externalize_threshold_bytes, sidecar_path)


def _serialize(module, target, strip_debuginfo, producer_version,
               externalize_threshold_bytes, sidecar_path) -> bytes:
  version = v.resolve_target(target)
  # The producer keeps the target as given (upstream writes the string it
  # was asked for); "current" / "minimum" resolve to numbers.
  spelled = target if isinstance(target, str) and target not in (
      "current", "minimum") else str(version)
  root = module_to_vhlo(module, version, strip_debuginfo, producer_version)

  def write():
    entries = []
    if sidecar_path is not None:
      entries = extern_constants.externalize(root, sidecar_path,
                                             externalize_threshold_bytes)
    bytecode_version = v.bytecode_version(version)
    f = vhlo_ir.to_file(root, bytecode_version, f"StableHLO_v{spelled}")
    if entries:
      f.resources = [tree.ResourceGroup("builtin", entries)]
    return writer.write(f)

  return _guard(write, "serialize_portable_artifact")


def read_vhlo(data: bytes) -> tuple:
  """(root VhloOp at the file's op versions, the file) of an artifact."""
  if not isinstance(data, (bytes, bytearray, memoryview)):
    raise support.InvalidArgumentError(
        f"expected bytes, got {type(data).__name__}")
  data = bytes(data)
  if not reader.is_bytecode(data):
    raise support.InvalidArgumentError(
        "not a portable artifact: missing the MLIR bytecode magic number")

  def run():
    f = reader.read(data, op_class=vhlo_ir.VhloOp)
    return vhlo_ir.from_file(f), f

  return _guard(run, "deserialize_portable_artifact")


def deserialize_portable_artifact(data: bytes, sidecar_path=None, *,
                                  verify_hashes: bool = True) -> core.Module:
  """The StableHLO module held by a portable artifact.

  `sidecar_path` is the file holding its extern constants, if any
  (memory-mapped; `verify_hashes` checks their sha256 on load).
  """
  try:
    with support.heap.gc_paused():
      return _deserialize(data, sidecar_path, verify_hashes)
  finally:
    bc.forget_locations()


def _deserialize(data, sidecar_path, verify_hashes) -> core.Module:
  root, f = read_vhlo(data)

  def run():
    extern_constants.resolve(root, f, sidecar_path, verify_hashes)
    _check_dialects(root)
    versioning.upgrade(root)
    return unlegalize.vhlo_to_module(root)

  return _guard(run, "deserialize_portable_artifact")


def _check_dialects(root: vhlo_ir.VhloOp) -> None:
  for op in root.walk():
    if op is root:
      if op.name != vhlo_ir.MODULE:
        raise support.InvalidArgumentError(
            f"the root op of a portable artifact must be builtin.module, "
            f"found {op.name}")
      continue
    name = op.name
    if name.startswith("vhlo."):  # (the dialect is "vhlo")
      continue
    if op.dialect != "vhlo" and vhlo_ir.foreign_properties(name) is None:
      raise support.UnimplementedError(
          f"operation '{op.name}' of dialect '{op.dialect}' in a portable "
          "artifact is not supported (only VHLO ops, and the sdy ops of "
          "mixed serialization, are)")


def get_portable_artifact_version(data: bytes) -> str:
  return v.get_portable_artifact_version(data)
