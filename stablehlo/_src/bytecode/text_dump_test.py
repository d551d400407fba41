"""Tests for the generic-syntax printer of the bytecode tree."""

import pytest

from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import testdata
from stablehlo._src.bytecode import text_dump


def test_dump_small_file():
  files = [p for p in testdata.all_bc_files()
           if p.name.startswith("vhlo_emit_version_api")]
  if not files:
    pytest.skip("no corpus")
  text = text_dump.dump(reader.read(files[0].read_bytes()))
  assert '"builtin.module"()' in text
  assert ('%0 = "vhlo.add_v1"(%arg0, %arg0) : (!vhlo.tensor_v1<!vhlo.f32_v1>, '
          '!vhlo.tensor_v1<!vhlo.f32_v1>) -> !vhlo.tensor_v1<!vhlo.f32_v1>'
          in text)
  assert '#vhlo.string_v1<"main">' in text


def test_dump_names_every_value():
  files = testdata.corpus_files()
  if not files:
    pytest.skip("no corpus")
  text = text_dump.dump(reader.read(files[-1][0].read_bytes()))
  assert "undefined" not in text
