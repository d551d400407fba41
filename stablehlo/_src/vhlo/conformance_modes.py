"""Conformance modes for portable artifacts (`stablehlo.tools.conformance`).

Each mode is `fn(src, filename, line_offset)` and raises on failure.

`deserialize` (suite vhlo) follows the RUN lines of each upstream file:
  * `X.mlir` with an `X.mlir.bc`: the artifact deserializes to a module equal
    to `X.mlir` in canonical form (`normalize.dump`, upstream compares the
    two `stablehlo-opt` printouts), and re-serializing `X.mlir` for the
    file's target gives the artifact byte for byte (upstream's `diff %s.bc`);
    a file whose RUN line expects `--deserialize` to fail must fail with the
    diagnostic its CHECK line names;
  * files converted to a target (`--vhlo-to-version` / `--serialize
    --target`): each case serializes for that target and reads back equal,
    every `vhlo.<op>_vN` its CHECK lines name is in the artifact, and a case
    with `expected-error` must be refused with a support error;
  * invalid targets (`vhlo_to_version_invalid.mlir`) must be refused.
Inputs written in VHLO itself (`vhlo_attributes_invalid.mlir`) test VHLO
verifiers that have no StableHLO-level API here; they fail with a message
saying so.

`serialize` (suite testdata): for targets 1.17.0, 1.15.0, 1.0.0, 0.9.0 the
module serializes (or is refused exactly where jaxlib refuses too), jaxlib's
`deserialize_portable_artifact` loads our bytes into the module jaxlib parses
from the text, and we read jaxlib's own artifact back to our parse. Modules
with CHLO ops must be refused (VHLO has no CHLO; upstream runs
`--chlo-pre-serialization-pipeline` first). `serialize_bytes` additionally
requires our bytes to equal jaxlib's (both without locations, use-list
records as jaxlib 1.17.0 writes them). Without jaxlib the jaxlib checks are
skipped and only our own round trip is checked.
"""

from __future__ import annotations

import functools
import pathlib
import re

import support
from stablehlo._src import text as mlir_text
from stablehlo._src.bytecode import reader
from stablehlo._src.vhlo import normalize
from stablehlo._src.vhlo import portable
from stablehlo._src.vhlo import versioning

SERIALIZE_TARGETS = ("1.17.0", "1.15.0", "1.0.0", "0.9.0")
JAXLIB_VERSION = "1.17.0"  # StableHLO inside jaxlib 0.10.2.


class ConformanceFailure(AssertionError):
  pass


def _check_equal(ours, expected, what: str) -> None:
  a, b = normalize.dump(ours), normalize.dump(expected)
  if a != b:
    raise ConformanceFailure(f"{what}: modules differ: "
                             f"{normalize.first_difference(a, b)}")


def _run_lines(src: str) -> list:
  return re.findall(r"^// RUN: (.*)$", src, re.M)


@functools.lru_cache(maxsize=64)
def _file_text(filename: str) -> str:
  return pathlib.Path(filename).read_text(encoding="utf-8",
                                          errors="surrogateescape")


def _target_of(filename: str, runs: list) -> str | None:
  for run in runs:
    m = re.search(r"target[= ]'?([0-9]+\.[0-9]+\.[0-9]+|current)", run)
    if m:
      return m.group(1)
  m = re.search(r"\.([0-9]+)_([0-9]+)_([0-9]+)\.mlir$", filename)
  return ".".join(m.groups()) if m else None


_VHLO_OP_RE = re.compile(r'(?<![!#\w])"?vhlo\.([a-z0-9_\-]+_v[0-9]+)')


def _checked_ops(src: str) -> set:
  names = set()
  for line in src.splitlines():
    m = re.match(r"\s*// CHECK(?:-NEXT|-SAME|-LABEL)?:(.*)", line)
    if m:
      names.update(_VHLO_OP_RE.findall(m.group(1)))
  return names


# --- deserialize (vhlo suite) ----------------------------------------------------


def mode_deserialize(src: str, filename: str, line_offset: int) -> None:
  whole = _file_text(filename)
  runs = _run_lines(whole)
  bc = pathlib.Path(filename + ".bc")
  if bc.exists():
    _deserialize_artifact(src, filename, line_offset, bc, runs, whole)
    return
  if pathlib.Path(filename).name == "vhlo_to_version_invalid.mlir":
    _invalid_targets(whole)
    return
  if any("--vhlo-to-version" in r and "--stablehlo-legalize-to-vhlo" not in r
         for r in runs):
    raise ConformanceFailure(
        "input is VHLO text checked by VHLO verifiers; there is no "
        "StableHLO-level API to run it against")
  target = _target_of(filename, runs) or "current"
  expect_error = "expected-error" in src or any(r.startswith("not ")
                                                for r in runs)
  _serialize_case(src, filename, line_offset, target, expect_error)


def _deserialize_artifact(src, filename, line_offset, bc, runs, whole):
  data = bc.read_bytes()
  expect_failure = any(r.startswith("not ") and "--deserialize" in r
                       for r in runs)
  if expect_failure:
    m = re.search(r"// CHECK: error: (.*)", whole)
    try:
      portable.deserialize_portable_artifact(data)
    except support.XlaError as e:
      if m and m.group(1).split(" found in")[0] not in str(e):
        raise ConformanceFailure(f"wrong diagnostic: {e}") from e
      return
    raise ConformanceFailure("deserializing should have failed")
  ours = portable.deserialize_portable_artifact(data)
  expected = mlir_text.parse_module(src, filename, line_offset)
  _check_equal(ours, expected, "deserialize(.bc) vs .mlir")
  m = re.search(r"\.([0-9]+)_([0-9]+)_([0-9]+)\.mlir$", filename)
  if m is None:
    return
  target = ".".join(m.groups())
  if portable.get_portable_artifact_version(data) != target:
    raise ConformanceFailure("producer version does not match the file name")
  if any("--strip-debuginfo" in r and "--serialize" in r for r in runs):
    again = portable.serialize_portable_artifact(expected, target,
                                                 strip_debuginfo=True)
    if again != data:
      raise ConformanceFailure(
          f"serializing the .mlir for {target} differs from the .bc "
          f"({len(again)} vs {len(data)} bytes)")


def _invalid_targets(whole: str) -> None:
  module = mlir_text.parse_module("func.func @f() {\n  return\n}\n")
  for target, prefix in (("", "EMPTY_TARGET"), ("100.10.10", "FUTURE_TARGET"),
                         ("0.0.0", "MINIMUM_TARGET"),
                         ("x.y.z", "NOT_VERSION_TARGET")):
    check = re.search(rf"// {prefix}: (.*)", whole)
    try:
      portable.serialize_portable_artifact(module, target)
    except support.InvalidArgumentError as e:
      if check and check.group(1).strip() not in str(e):
        raise ConformanceFailure(
            f"target {target!r}: expected {check.group(1)!r} in {e}") from e
      continue
    raise ConformanceFailure(f"target {target!r} should be refused")


def _serialize_case(src, filename, line_offset, target,
                    expect_error) -> None:
  module = mlir_text.parse_module(src, filename, line_offset)
  try:
    data = portable.serialize_portable_artifact(module, target)
  except (versioning.UnsupportedAtTargetError,
          support.InvalidArgumentError) as e:
    if expect_error:
      return
    raise ConformanceFailure(f"serializing for {target} failed: {e}") from e
  if expect_error:
    raise ConformanceFailure(f"serializing for {target} should have failed")
  names = {op.name[5:] for op in portable.read_vhlo(data)[0].walk()}
  missing = _checked_ops(src) - names
  if missing:
    raise ConformanceFailure(f"CHECK lines name {sorted(missing)}, not in "
                             f"the artifact for {target}")
  _check_equal(portable.deserialize_portable_artifact(data), module,
               f"round trip through {target}")


# --- serialize (testdata suite, against jaxlib) -------------------------------------


@functools.lru_cache(maxsize=1)
def _jaxlib():
  """(stablehlo module, context, ir, passmanager) or None without jaxlib."""
  try:
    from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=g-import-not-at-top
    from jaxlib.mlir import ir  # pylint: disable=g-import-not-at-top
    from jaxlib.mlir import passmanager  # pylint: disable=g-import-not-at-top
    from jaxlib.mlir.dialects import stablehlo  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return stablehlo, jax_mlir.make_ir_context(), ir, passmanager


def _jaxlib_parse(jl, text: str):
  stablehlo, ctx, ir, passmanager = jl
  try:
    module = ir.Module.parse(text, ctx)
  except ir.MLIRError:
    return None
  with ctx:
    passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(
        module.operation)
  return module


def _jaxlib_text(module) -> str:
  return module.operation.get_asm(enable_debug_info=False,
                                  print_generic_op_form=True)


def _serialize_testdata(src: str, filename: str, line_offset: int,
                        require_bytes: bool) -> None:
  module = mlir_text.parse_module(src, filename, line_offset)
  if any(op.dialect == "chlo" for op in module.walk()):
    try:
      portable.serialize_portable_artifact(module, "current")
    except support.InvalidArgumentError as e:
      if "CHLO" not in str(e):
        raise ConformanceFailure(f"unclear refusal of CHLO: {e}") from e
      return
    raise ConformanceFailure("a module with CHLO ops must be refused")
  jl = _jaxlib()
  reference = _jaxlib_parse(jl, src) if jl else None
  # jaxlib's serializer rewrites the module it is given (to VHLO) in place,
  # so keep the text of the reference and serialize fresh copies.
  reference_text = _jaxlib_text(reference) if reference is not None else None
  for target in SERIALIZE_TARGETS:
    theirs = None
    if reference is not None:
      try:
        theirs = jl[0].serialize_portable_artifact(_jaxlib_parse(jl, src),
                                                   target)
      except ValueError:
        theirs = None
    try:
      ours = portable.serialize_portable_artifact(
          module, target, strip_debuginfo=True,
          producer_version=JAXLIB_VERSION)
    except support.InvalidArgumentError as e:
      # A refusal is right where jaxlib refuses too (ops of other dialects,
      # features newer than the target); without jaxlib, only for modules
      # holding ops that VHLO cannot express.
      if reference is not None and theirs is not None:
        raise ConformanceFailure(f"{target}: we refuse what jaxlib "
                                 f"serializes: {e}") from e
      if reference is None and not isinstance(
          e, versioning.UnsupportedAtTargetError) and not _foreign_ops(module):
        raise ConformanceFailure(f"{target}: refused: {e}") from e
      continue
    _check_equal(portable.deserialize_portable_artifact(ours), module,
                 f"our round trip through {target}")
    if reference is None:
      continue
    if theirs is None:
      raise ConformanceFailure(f"{target}: jaxlib refuses what we serialize")
    stablehlo, ctx, _, _ = jl
    try:
      loaded = stablehlo.deserialize_portable_artifact(ctx, ours)
    except ValueError as e:
      raise ConformanceFailure(f"{target}: jaxlib cannot load our "
                               "artifact") from e
    if _jaxlib_text(loaded) != reference_text:
      raise ConformanceFailure(f"{target}: jaxlib reads back a different "
                               "module from our artifact")
    _check_equal(portable.deserialize_portable_artifact(theirs), module,
                 f"reading jaxlib's {target} artifact")
    if require_bytes and ours != theirs:
      raise ConformanceFailure(
          f"{target}: bytes differ from jaxlib's ({len(ours)} vs "
          f"{len(theirs)}): {_first_byte_difference(ours, theirs)}")


def _first_byte_difference(a: bytes, b: bytes) -> str:
  from stablehlo._src.bytecode import text_dump  # pylint: disable=g-import-not-at-top
  try:
    la = text_dump.dump(reader.read(a)).splitlines()
    lb = text_dump.dump(reader.read(b)).splitlines()
  except support.XlaError:
    return "(undecodable)"
  for x, y in zip(la, lb):
    if x != y:
      return f"\n  ours:   {x[:300]}\n  jaxlib: {y[:300]}"
  return "same IR; encoding differs"


def _foreign_ops(module) -> bool:
  return any(op.dialect not in ("stablehlo", "func") and op is not module.op
             for op in module.walk())


def mode_serialize(src: str, filename: str, line_offset: int) -> None:
  _serialize_testdata(src, filename, line_offset, require_bytes=False)


def mode_serialize_bytes(src: str, filename: str, line_offset: int) -> None:
  _serialize_testdata(src, filename, line_offset, require_bytes=True)


MODES = {
    "deserialize": mode_deserialize,
    "serialize": mode_serialize,
    "serialize_bytes": mode_serialize_bytes,
}
