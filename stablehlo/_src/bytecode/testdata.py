"""Shared helpers of the bytecode tests: the VHLO corpus files."""

from __future__ import annotations

import re

from support import env

# Bytecode version by StableHLO target (notes/bytecode.md).
_VERSION_TABLE = (((0, 10, 0), 0), ((0, 12, 0), 1), ((0, 14, 0), 3),
                  ((0, 15, 0), 4))


def expected_bytecode_version(target: tuple) -> int:
  for bound, version in _VERSION_TABLE:
    if target < bound:
      return version
  return 6


def corpus_files() -> list:
  """(path, (major, minor, patch)) of each versioned `.mlir.bc` file."""
  root = env.stablehlo_corpus("vhlo")
  if root is None:
    return []
  out = []
  for path in sorted(root.glob("stablehlo_legalize_to_vhlo.*.mlir.bc")):
    m = re.search(r"\.(\d+)_(\d+)_(\d+)\.mlir\.bc$", path.name)
    out.append((path, tuple(int(g) for g in m.groups())))
  return out


def all_bc_files() -> list:
  root = env.stablehlo_corpus("vhlo")
  return sorted(root.glob("*.bc")) if root is not None else []
