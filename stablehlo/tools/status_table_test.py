"""Tests for the status table tool."""

import csv
import io

import pytest

from stablehlo._src.ops import registry
from stablehlo._src.ops import spec_constraints
from stablehlo.tools import status_table


def test_every_registered_op_appears():
  table = status_table.render("csv")
  rows = list(csv.reader(io.StringIO(table)))
  assert tuple(rows[0]) == status_table.COLUMNS
  names = [r[0] for r in rows[1:]]
  assert names == [d.name for d in registry.all_ops()]
  for op in spec_constraints.SPEC_OPS:
    assert "stablehlo." + op in names


def test_spec_columns():
  by_name = {r[0]: r for r in status_table.rows()}
  assert by_name["stablehlo.slice"][1] == "slice"
  assert by_name["stablehlo.slice"][2] == "5/5"
  assert by_name["func.func"][1] == "no"
  assert by_name["stablehlo.convolution"][2].endswith("/34")


def test_markdown_and_cli(tmp_path, capsys):
  out = tmp_path / "t.md"
  assert status_table.main(["--format", "md", "--output", str(out)]) == 0
  text = out.read_text()
  assert text.startswith("| op | spec | verifier |")
  assert "spec constraints verified" in text
  assert status_table.main(["--format", "csv"]) == 0
  assert capsys.readouterr().out.startswith("op,spec,verifier")
  assert status_table.main(["--load", "no_such_module_xyz"]) == 1
  with pytest.raises(SystemExit) as e:
    status_table.main(["--help"])
  assert e.value.code == 0
