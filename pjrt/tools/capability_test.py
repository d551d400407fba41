"""Tests of `python -m pjrt.tools.capability` (run in-process via main)."""

import json

import pytest

from pjrt._src import capability as capability_lib
from pjrt._src import test_util
from pjrt.tools import capability
from stablehlo.text import parse_module
from stablehlo.vhlo import portable

SUPPORTED = """
module {
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %a : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

UNSUPPORTED = """
module {
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "foo.bar"(%a) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

MAYBE = """
module {
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @capability_cli_test_target(%a)
        : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""


@pytest.fixture
def files(tmp_path):
  paths = {}
  for name, text in (("ok", SUPPORTED), ("bad", UNSUPPORTED),
                     ("maybe", MAYBE)):
    paths[name] = tmp_path / f"{name}.mlir"
    paths[name].write_text(text)
  paths["bc"] = tmp_path / "ok.mlirbc"
  paths["bc"].write_bytes(portable.serialize_portable_artifact(
      parse_module(SUPPORTED), "current"))
  paths["split"] = tmp_path / "split.mlir"
  paths["split"].write_text(SUPPORTED + "\n// -----\n" + UNSUPPORTED)
  return paths


def _run(capsys, *argv):
  code = capability.main([str(a) for a in argv])
  out, err = capsys.readouterr()
  return code, out, err


def test_help(capsys):
  with pytest.raises(SystemExit) as e:
    capability.main(["--help"])
  assert e.value.code == 0
  out = capsys.readouterr().out
  for word in ("--plugin", "--json", "--table", "Exit status"):
    assert word in out


def test_exit_status_per_verdict(capsys, files):
  assert _run(capsys, files["ok"])[0] == capability.EXIT_SUPPORTED
  assert _run(capsys, files["bad"])[0] == capability.EXIT_UNSUPPORTED
  assert _run(capsys, files["maybe"])[0] == capability.EXIT_MAYBE
  # The worst program decides.
  assert _run(capsys, files["ok"], files["maybe"],
              files["bad"])[0] == capability.EXIT_UNSUPPORTED


def test_table_output(capsys, files):
  code, out, _ = _run(capsys, files["bad"])
  assert code == 1
  lines = out.splitlines()
  assert lines[0] == f"== {files['bad']}"
  assert lines[1].split() == ["op", "count", "status", "reason"]
  # Worst first: the unknown op leads the table.
  assert lines[2].split()[:3] == ["foo.bar", "1", "unsupported"]
  assert lines[-1].endswith("-> unsupported")


def test_json_output(capsys, files):
  code, out, _ = _run(capsys, "--json", "--timing", files["ok"], files["bc"])
  assert code == 0
  data = json.loads(out)
  assert data["source"] == "interpreter" and data["status"] == "supported"
  assert [p["program"] for p in data["programs"]] == [str(files["ok"]),
                                                      str(files["bc"])]
  # Text and bytecode of one module give the same ops.
  assert data["programs"][0]["ops"] == data["programs"][1]["ops"]
  assert set(data["programs"][0]["timing"]) == {"parse_ms", "query_ms"}


def test_split_input_file(capsys, files):
  code, out, _ = _run(capsys, "--split-input-file", "--summary-only",
                      files["split"])
  assert code == 1
  lines = out.splitlines()
  assert len(lines) == 2
  assert lines[0].startswith(f"{files['split']}#0:")
  assert lines[0].endswith("-> supported")
  assert lines[1].endswith("-> unsupported")


def test_usage_errors(capsys, files, tmp_path):
  assert _run(capsys)[0] == capability.EXIT_USAGE  # No program.
  code, _, err = _run(capsys, tmp_path / "missing.mlir")
  assert code == capability.EXIT_USAGE and "missing.mlir" in err
  garbage = tmp_path / "garbage.mlir"
  garbage.write_text("module { not mlir")
  code, _, err = _run(capsys, garbage)
  assert code == capability.EXIT_USAGE and "error" in err
  code, _, err = _run(capsys, "--source", "no_such_source", files["ok"])
  assert code == capability.EXIT_USAGE and "no_such_source" in err
  code, _, err = _run(capsys, "--load", "no_such_module_xyz", files["ok"])
  assert code == capability.EXIT_USAGE
  with pytest.raises(SystemExit) as e:
    capability.main(["--source", "a", "--table", "b", str(files["ok"])])
  assert e.value.code == 2


def test_dump_table_and_table_option(capsys, files, tmp_path):
  code, out, _ = _run(capsys, "--dump-table")
  assert code == 0
  table = json.loads(out)
  assert table["name"] == "interpreter"
  assert table["ops"]["stablehlo.add"] == "supported"
  # A hand-made table that knows the custom_call target.
  table["custom_call_targets"] = (table["custom_call_targets"] or []) + [
      "capability_cli_test_target"]
  path = tmp_path / "table.json"
  path.write_text(json.dumps(table))
  assert _run(capsys, "--table", path, files["maybe"])[0] == 0
  assert _run(capsys, files["maybe"])[0] == capability.EXIT_MAYBE


def test_registered_source(capsys, files):
  table = capability_lib.foreign_table("cli test", name="cli_test_source")
  capability_lib.register_source("cli_test_source", table)
  try:
    code, out, _ = _run(capsys, "--source", "cli_test_source",
                        "--summary-only", files["ok"])
  finally:
    capability_lib.unregister_source("cli_test_source")
  assert code == capability.EXIT_MAYBE
  assert "against 'cli_test_source'" in out


@test_util.requires_xla_cpu_pjrt
def test_foreign_plugin_is_maybe(capsys, files):
  code, out, _ = _run(capsys, "--json", "--plugin",
                      test_util.xla_cpu_pjrt_path(), files["ok"])
  assert code == capability.EXIT_MAYBE
  ops = {o["name"]: o for o in json.loads(out)["programs"][0]["ops"]}
  assert ops["stablehlo.add"]["status"] == "maybe"
  assert ops["stablehlo.add"]["reasons"] == [capability_lib.NO_INFORMATION]
