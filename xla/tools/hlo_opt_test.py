"""Tests for the hlo_opt command-line tool."""

import importlib.util
import io
import os

import pytest

from xla.hlo.pass_ import hlo_pass_fix
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.tools import hlo_opt

_DEAD = """HloModule dead

ENTRY main {
  p = f32[4] parameter(0)
  unused = f32[4] multiply(p, p)
  ROOT n = f32[4] negate(p)
}
"""

_DUPLICATES = """HloModule dup

ENTRY main {
  p = f32[4] parameter(0)
  e1 = f32[4] exponential(p)
  e2 = f32[4] exponential(p)
  ROOT s = f32[4] add(e1, e2)
}
"""


def _run(argv):
  out, err = io.StringIO(), io.StringIO()
  code = hlo_opt.main(argv, stdout=out, stderr=err)
  return code, out.getvalue(), err.getvalue()


def _write(tmp_path, text, name="in.hlo"):
  path = tmp_path / name
  path.write_text(text)
  return str(path)


def test_help(capsys):
  assert hlo_opt.main(["--help"]) == 0
  assert "--passes" in capsys.readouterr().out


def test_no_passes_prints_the_module(tmp_path):
  code, out, err = _run([_write(tmp_path, _DEAD)])
  assert code == 0, err
  assert "unused = f32[4]{0} multiply(p, p)" in out


def test_dce_removes_dead_instruction(tmp_path):
  code, out, err = _run([_write(tmp_path, _DEAD), "--passes=dce"])
  assert code == 0, err
  assert "unused" not in out
  assert "ROOT n = f32[4]{0} negate(p)" in out


def test_cse_merges_duplicates(tmp_path):
  code, out, err = _run([_write(tmp_path, _DUPLICATES), "--passes=cse,dce"])
  assert code == 0, err
  assert out.count("exponential(p)") == 1


def test_output_file_and_dump_dir(tmp_path):
  out_file = tmp_path / "out.hlo"
  dump = tmp_path / "dump"
  code, out, err = _run([_write(tmp_path, _DEAD), "--passes=cse,dce",
                         f"--dump-to={dump}", "-o", str(out_file)])
  assert code == 0, err
  assert out == ""
  assert "unused" not in out_file.read_text()
  names = sorted(os.listdir(dump))
  assert len(names) == 2
  assert names[0].endswith(".cse.txt") and names[1].endswith(".dce.txt")
  assert "unused" in (dump / names[0]).read_text()
  assert "unused" not in (dump / names[1]).read_text()


def test_parse_error_has_file_line_col(tmp_path):
  text = _DEAD.replace("negate(p)", "negate(q)")
  path = _write(tmp_path, text)
  line_no = next(i for i, line in enumerate(text.splitlines(), 1)
                 if "negate(q)" in line)
  col = text.splitlines()[line_no - 1].index("q)") + 1
  code, out, err = _run([path])
  assert code == 1
  assert out == ""
  assert err.startswith(f"{path}:{line_no}:{col}: error:")
  assert "Traceback" not in err


def test_verifier_error(tmp_path):
  text = _DEAD.replace("ROOT n = f32[4] negate(p)", "ROOT n = f32[5] negate(p)")
  code, _, err = _run([_write(tmp_path, text)])
  assert code == 1
  assert "n" in err and "Traceback" not in err


def test_missing_file(tmp_path):
  code, _, err = _run([str(tmp_path / "nope.hlo")])
  assert code == 1
  assert "cannot read" in err


def test_unknown_pass_is_usage_error(tmp_path):
  code, _, err = _run([_write(tmp_path, _DEAD), "--passes=dce,bogus"])
  assert code == 2
  assert "unknown pass 'bogus'" in err


def test_unavailable_pass_is_reported(tmp_path, monkeypatch):
  monkeypatch.setitem(hlo_opt.PASSES, "future", hlo_opt.PassEntry(
      (("xla.no_such_module_for_test", "Future"),), "not written yet"))
  code, _, err = _run([_write(tmp_path, _DEAD), "--passes=future"])
  assert code == 2
  assert "pass 'future' is not available" in err
  code, out, _ = _run(["--list-passes"])
  assert code == 0
  line = next(l for l in out.splitlines() if l.startswith("future "))
  assert "not available" in line
  assert "dce" in out and "available" in out


def test_pipeline_skips_unavailable_passes(tmp_path, monkeypatch):
  monkeypatch.setitem(hlo_opt.PASSES, "future", hlo_opt.PassEntry(
      (("xla.no_such_module_for_test", "Future"),), "not written yet"))
  monkeypatch.setitem(hlo_opt.PIPELINES, "test", ("future", "dce"))
  code, out, err = _run([_write(tmp_path, _DEAD), "--pipeline=test"])
  assert code == 0, err
  assert "skipping pass 'future'" in err
  assert "unused" not in out


def test_load_pass_fixed_point_and_lazy_import():
  pass_ = hlo_opt.load_pass("algsimp")
  assert isinstance(pass_, hpi.HloPassInterface)
  assert isinstance(pass_, hlo_pass_fix.HloPassFix)  # run to a fixed point
  assert hlo_opt.load_pass("dce").name == "dce"


class _Broken(hpi.HloModulePass):

  @property
  def name(self):
    return "broken"

  def run(self, module, execution_threads=frozenset()):
    raise RuntimeError("boom")


def test_internal_error_has_no_traceback(tmp_path, monkeypatch):
  monkeypatch.setitem(hlo_opt.PASSES, "broken", hlo_opt.PassEntry(
      ((__name__, "_Broken"),), "always fails"))
  monkeypatch.delenv("HLO_OPT_TRACEBACK", raising=False)
  code, _, err = _run([_write(tmp_path, _DEAD), "--passes=broken"])
  assert code == 3
  assert "internal error: RuntimeError: boom" in err
  assert "Traceback" not in err


def test_dot_and_html_formats(tmp_path):
  path = _write(tmp_path, _DEAD)
  code, out, err = _run([path, "--format=dot"])
  assert code == 0, err
  assert out.startswith('digraph "main"')
  assert out.count("{") == out.count("}")
  assert out.count("->") == 3  # p->unused twice, p->n
  html_file = tmp_path / "g.html"
  code, _, err = _run([path, "--passes=dce", "--format=html", "-o",
                       str(html_file)])
  assert code == 0, err
  page = html_file.read_text()
  assert page.count('<g class="node') == 2  # p and n once unused is gone


def test_computation_flag(tmp_path):
  text = """HloModule m

add_comp {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add_comp
}
"""
  path = _write(tmp_path, text)
  code, out, err = _run([path, "--format=dot", "--computation=add_comp"])
  assert code == 0, err
  assert '"s\\nadd' in out and "reduce" not in out
  code, _, err = _run([path, "--format=dot", "--computation=nope"])
  assert code == 1
  assert "no computation named 'nope'" in err and "add_comp" in err


_MLIR = """module @m {
  func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.negate %a : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
"""


def _importer_present():
  try:
    return importlib.util.find_spec("xla.translate.stablehlo_to_hlo") is not None
  except ModuleNotFoundError:  # no xla.translate package at all
    return False


@pytest.mark.skipif(not _importer_present(),
                    reason="xla/translate/stablehlo_to_hlo.py not present")
def test_stablehlo_input(tmp_path):
  code, out, err = _run([_write(tmp_path, _MLIR, "in.mlir")])
  assert code == 0, err
  assert "negate(" in out


def test_stablehlo_parse_error_is_positioned(tmp_path):
  path = _write(tmp_path, _MLIR.replace("negate %a", "negate %zz"),
                "bad.mlir")
  code, _, err = _run([path])
  assert code == 1
  assert "Traceback" not in err
  if _importer_present():
    assert err.startswith(f"{path}:3:")


_CHAIN = """HloModule chain

ENTRY main {
  p = f32[256] parameter(0)
  a = f32[256] exponential(p)
  b = f32[256] log(a)
  c = f32[256] exponential(b)
  ROOT d = f32[256] log(c)
}
"""


def test_memory_report_without_passes(tmp_path):
  # 1 KiB per value. a and c never live at once: they share heap bytes;
  # b needs its own. With reuse: p + d + 2 KiB heap; without: 5 values.
  # Peak live: p (whole program) + two neighbours of the chain.
  code, out, err = _run([_write(tmp_path, _CHAIN), "--memory-report"])
  assert code == 0, err
  assert "with reuse:       4096 bytes (parameters 1024, constants 0, " \
         "output 1024, temporary heap 2048)" in out
  assert "without reuse:    5120 bytes (temporaries 3072)" in out
  assert "ratio:            0.800" in out
  assert "peak live:        3072 bytes" in out
  assert "HloModule" not in out


def test_memory_report_after_the_default_pipeline(tmp_path):
  # Fusion leaves one loop fusion: nothing temporary remains.
  code, out, err = _run([_write(tmp_path, _CHAIN), "--pipeline=default",
                         "--memory-report"])
  assert code == 0, err
  assert "(module chain, pipeline default)" in out
  assert "temporary heap 0)" in out
  assert "ratio:            1.000" in out


_GLOBAL = """HloModule global, num_partitions=4

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[16,8] parameter(0), sharding={devices=[4,1]<=[4]}
  h = f32[16,8] tanh(x)
  zero = f32[] constant(0)
  ROOT total = f32[8] reduce(h, zero), dimensions={0}, to_apply=sum, sharding={replicated}
}
"""


def test_spmd_partitioning_before_and_after(tmp_path):
  code, out, err = _run([_write(tmp_path, _GLOBAL),
                         "--passes=spmd-partitioning", "--show-before"])
  assert code == 0, err
  before, after = out.split("// after: cpu-spmd-partitioning\n")
  assert before.startswith("// before: ")
  # Before: the global shapes, no collective; after: one partition's
  # shard and the all-reduce of the partial sums.
  assert "x = f32[16,8]{1,0} parameter(0)" in before
  assert "all-reduce" not in before
  assert "f32[4,8]{1,0} parameter(0)" in after
  assert "all-reduce(" in after and "replica_groups={{0,1,2,3}}" in after


def test_sharding_propagation_pass(tmp_path):
  code, out, err = _run([_write(tmp_path, _GLOBAL),
                         "--passes=sharding-propagation"])
  assert code == 0, err
  assert "h = f32[16,8]{1,0} tanh(x), sharding={devices=[4,1]<=[4]}" in out


def test_show_before_is_text_only(tmp_path):
  code, _, err = _run([_write(tmp_path, _GLOBAL), "--show-before",
                       "--format=dot"])
  assert code == 2 and "--show-before" in err


def test_bundled_spmd_example(tmp_path):
  path = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                      "spmd_mlp.hlo")
  if not os.path.exists(path):
    pytest.skip("bundled examples not found")
  code, out, err = _run([path, "--passes=spmd-partitioning",
                         "--show-before"])
  assert code == 0, err
  assert "all-reduce(" in out.split("// after:")[1]


def test_bundled_spmd_halo_example(tmp_path):
  path = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                      "spmd_conv_halo.hlo")
  if not os.path.exists(path):
    pytest.skip("bundled examples not found")
  code, out, err = _run([path, "--passes=spmd-partitioning",
                         "--show-before"])
  assert code == 0, err
  after = out.split("// after:")[1]
  assert "collective-permute(" in after and "all-gather(" not in after
