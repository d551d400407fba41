"""Tests for the portable-artifact conformance modes (fixed small sample)."""

import pytest

from stablehlo._src import text as mlir_text
from stablehlo._src.vhlo import conformance_modes as cm
from support import env


def _cases(suite, name):
  root = env.stablehlo_corpus(suite)
  if root is None:
    pytest.skip(env.missing_corpus_reason(suite))
  path = root / name
  src = path.read_text()
  if suite == "testdata":
    return str(path), [(src, 0)]
  return str(path), [(c.text, c.first_line)
                     for c in mlir_text.split_input_file(src)]


@pytest.mark.parametrize("name", [
    "stablehlo_legalize_to_vhlo.1_5_0.mlir",
    "vhlo_emit_version_api.1_1_0.mlir",
    "invalid_vhlo_future.mlir",
    "vhlo_to_version_downgrade.1_9_0.mlir",
    "vhlo_to_version_downgrade_invalid.1_9_0.mlir",
    "vhlo_to_version_invalid.mlir",
    "legalize_stablehlo_to_vhlo_invalid.mlir",
])
def test_deserialize_mode(name):
  path, cases = _cases("vhlo", name)
  for src, offset in cases:
    cm.mode_deserialize(src, path, offset)


def test_deserialize_mode_rejects_vhlo_text_inputs():
  path, cases = _cases("vhlo", "vhlo_attributes_invalid.mlir")
  with pytest.raises(cm.ConformanceFailure, match="VHLO text"):
    cm.mode_deserialize(cases[0][0], path, cases[0][1])


@pytest.mark.parametrize("name", [
    "abs_float32_20_20.mlir",
    "acos_complex64_20_20_chlo.mlir",
    "dot_general_float32_4_3_float64_3_6.mlir",
])
def test_serialize_modes(name):
  root = env.stablehlo_corpus("testdata")
  if root is None or not (root / name).exists():
    pytest.skip(env.missing_corpus_reason("testdata"))
  path, cases = _cases("testdata", name)
  cm.mode_serialize(cases[0][0], path, 0)
  if cm._jaxlib() is not None:  # pylint: disable=protected-access
    cm.mode_serialize_bytes(cases[0][0], path, 0)
