"""Tests for use-list order records.

The expected records (see `testdata.py`) are what jaxlib writes;
`portable_jaxlib_test` checks the same programs against a live jaxlib.
"""

import pytest

from stablehlo._src import text as mlir_text
from stablehlo._src.vhlo import portable
from stablehlo._src.vhlo import testdata

PROGRAMS = testdata.USE_LIST_PROGRAMS
records = testdata.use_list_records


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_records_match_jaxlib(name):
  text, expected = PROGRAMS[name]
  module = mlir_text.parse_module(text)
  data = portable.serialize_portable_artifact(module, "1.8.0",
                                              strip_debuginfo=True)
  assert records(data) == expected
  # Nothing is rewritten at the current version: no records at all.
  assert records(portable.serialize_portable_artifact(module, "1.10.0")) == []


def test_producer_version_decides_what_counts_as_rewritten():
  text = ("func.func @main(%a: tensor<f32>) -> tensor<f32> {\n"
          "  stablehlo.custom_call @f(%a) : (tensor<f32>) -> ()\n"
          "  return %a : tensor<f32>\n}")
  module = mlir_text.parse_module(text)
  # StableHLO 1.20 rewrites custom_call_v2 into v1 for 1.17.0 ...
  assert records(portable.serialize_portable_artifact(module, "1.17.0")) == [
      ("block", [(0, False, (1, 0))])]
  # ... while a 1.17.0 producer (jaxlib) creates v1 directly.
  assert records(portable.serialize_portable_artifact(
      module, "1.17.0", producer_version="1.17.0")) == []
