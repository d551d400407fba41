"""Reading a module for the tools: HLO text, a binary HloModuleProto, or
StableHLO MLIR (legalized and imported)."""

from __future__ import annotations

import support


def read_module(path: str, text: str):
  """Parses HLO text, StableHLO MLIR for a `.mlir` path, or a binary
  HloModuleProto for a `.pb` path (then `text` is bytes), unverified."""
  if path.endswith(".pb"):
    from xla.hlo.proto import hlo_proto  # pylint: disable=g-import-not-at-top
    return hlo_proto.hlo_module_from_proto(text)
  if path.endswith(".mlir"):
    try:
      from xla.translate import stablehlo_to_hlo  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise support.UnimplementedError(
          f"{path}: StableHLO input needs xla/translate/stablehlo_to_hlo.py, "
          f"which is not available ({e}); give HLO text instead") from None
    from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
    from stablehlo import verify  # pylint: disable=g-import-not-at-top
    smodule = mlir_text.parse_module(text, path)
    verify.verify_module(smodule)
    try:
      # CHLO and quantized types are legalized first (StableHLO passes).
      return stablehlo_to_hlo.legalize_and_import(smodule)
    except ImportError as e:  # the importer is incomplete
      raise support.UnimplementedError(
          f"{path}: the StableHLO importer is not usable: {e}") from None
  from xla.hlo.parser import hlo_parser  # pylint: disable=g-import-not-at-top
  try:
    return hlo_parser.parse_and_return_unverified_module(text)
  except hlo_parser.HloParseUnimplementedError as e:
    # The parser's messages start with "LINE:COL: error:".
    raise support.UnimplementedError(f"{path}:{e}") from None
  except hlo_parser.HloParseError as e:
    raise support.InvalidArgumentError(f"{path}:{e}") from None
