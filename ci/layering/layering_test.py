"""The layering test: import scan + bazel query over the real tree, and proof
that both checks fail on planted violations (testdata/planted)."""

import os
import pathlib
import shutil

import pytest

from ci.layering import layering
from support._src import env

ROOT = env.source_root()
PLANTED = pathlib.Path(__file__).resolve().parent / "testdata" / "planted"


def test_planted_import_violations_are_all_found():
  found = {(v.path, v.imported) for v in layering.scan_imports(PLANTED)}
  assert found == {
      ("support/bad.py", "stablehlo.ir"),
      ("stablehlo/bad.py", "xla.service"),
      ("xla/bad.py", "pjrt.client"),
      ("pjrt/client/bad.py", "xla"),
      ("torch_bridge/bad.py", "xla.service"),
  }


def test_cpu_plugin_exception_is_narrow():
  paths = {v.path for v in layering.scan_imports(PLANTED)}
  assert "pjrt/_src/plugin/backends.py" not in paths
  assert "pjrt/client/bad.py" in paths


def test_planted_query_violations_are_found():
  labels = ["//stablehlo:stablehlo", "//support:support",
            "//xla/service:hlo", "@pypi//:numpy", "//pjrt:pjrt"]
  assert layering.check_query("stablehlo", labels) == [
      "//xla/service:hlo", "//pjrt:pjrt"]
  assert layering.check_query("support", ["//stablehlo/_src/ir:core"]) == [
      "//stablehlo/_src/ir:core"]
  assert layering.check_query("xla", ["//pjrt/client:client"]) == [
      "//pjrt/client:client"]


def test_torch_bridge_may_not_reach_xla():
  labels = ["//torch_bridge:torch_bridge", "//pjrt:pjrt", "//stablehlo:text",
            "//support:support", "//xla/service:hlo", "@pypi//:torch"]
  assert layering.check_query("torch_bridge", labels) == ["//xla/service:hlo"]
  # Its libraries are queried, not its tests (which load our CPU plugin).
  assert layering.query_expression("torch_bridge") == (
      "deps(kind(py_library, //torch_bridge/...))")
  assert layering.query_expression("pjrt") == "deps(//pjrt/...)"


def test_real_tree_imports_respect_layering():
  violations = layering.scan_imports(ROOT)
  assert not violations, "\n".join(map(str, violations))


@pytest.mark.parametrize("layer", layering.LAYERS)
def test_real_tree_bazel_query_respects_layering(layer, tmp_path):
  if shutil.which("bazel") is None:
    pytest.skip("bazel is not on PATH")
  # A private, batch-mode output base: the outer Bazel server holds the lock
  # of the workspace's default one while this test runs.
  base = os.environ.get("TEST_TMPDIR", str(tmp_path))
  labels = layering.bazel_query_deps(ROOT, layer,
                                     output_base=os.path.join(base, "ob"))
  assert f"//{layer}:{layer}" in labels
  bad = layering.check_query(layer, labels)
  assert not bad, f"deps(//{layer}/...) reaches {bad}"


def test_planted_import_cycle_is_found():
  assert layering.import_cycles(PLANTED) == [
      ["xla.cycle.family", "xla.cycle.table"]]


def test_planted_foreign_src_import_is_found():
  found = {(v.path, v.imported) for v in layering.foreign_src_imports(PLANTED)}
  assert found == {("xla/private.py", "stablehlo._src.ir"),
                   ("torch_bridge/private.py", "pjrt._src")}


def test_real_tree_has_no_import_cycles():
  cycles = layering.import_cycles(ROOT)
  assert not cycles, cycles


def test_real_tree_src_imports_are_only_the_listed_debt():
  offenders = {v.path for v in layering.foreign_src_imports(ROOT)}
  debt = layering.src_import_debt()
  assert offenders <= debt, sorted(offenders - debt)
  assert debt <= offenders, ("no longer needed in the debt list: "
                             f"{sorted(debt - offenders)}")
