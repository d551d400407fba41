"""Builds the wheels, then installs the stablehlo wheel (which pulls in
support) into a fresh venv with no xla or pjrt, and uses it there."""

import json
import os
import pathlib
import subprocess
import textwrap
import venv
import zipfile

import pytest

from ci.wheels import components
from ci.wheels import wheel_builder
from support._src import env

ROOT = env.source_root()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
  out = tmp_path_factory.mktemp("dist")
  paths = wheel_builder.build_all(ROOT, out)
  return {p.name.split("-")[0]: p for p in paths}


def _metadata(path):
  with zipfile.ZipFile(path) as zf:
    name = next(n for n in zf.namelist() if n.endswith("/METADATA"))
    return zf.read(name).decode()


def test_one_wheel_per_component(wheels):
  assert sorted(wheels) == sorted(
      c.distribution.replace("-", "_") for c in components.COMPONENTS)


def test_dependencies_between_components(wheels):
  def ours(dist):
    meta = _metadata(wheels[dist])
    return {line.split(": ", 1)[1].split("==")[0]
            for line in meta.splitlines()
            if line.startswith("Requires-Dist: openxla-")}
  assert ours("openxla_support") == set()
  assert ours("openxla_stablehlo") == {"openxla-support"}
  assert ours("openxla_xla") == {"openxla-support", "openxla-stablehlo"}
  assert ours("openxla_pjrt") == {"openxla-support", "openxla-stablehlo",
                                  "openxla-xla"}
  assert ours("openxla_torch_bridge") == {
      "openxla-support", "openxla-stablehlo", "openxla-pjrt"}
  assert "Requires-Dist: numpy>=" in _metadata(wheels["openxla_stablehlo"])


def test_third_party_requirements_stop_before_breaking_releases(wheels):
  # A 0.x project may break in a minor release, others in a major one.
  xla = _metadata(wheels["openxla_xla"]).splitlines()
  pins = wheel_builder.read_pins(ROOT / "requirements.txt")
  assert (f"Requires-Dist: llvmlite>={pins['llvmlite']},<0."
          f"{int(pins['llvmlite'].split('.')[1]) + 1}") in xla
  assert (f"Requires-Dist: protobuf>={pins['protobuf']},<"
          f"{int(pins['protobuf'].split('.')[0]) + 1}") in xla
  bridge = _metadata(wheels["openxla_torch_bridge"]).splitlines()
  assert "Requires-Dist: torch>=2.13" in bridge


def test_wheels_hold_only_their_package_and_no_tests(wheels):
  for dist, path in wheels.items():
    package = dist.split("_", 1)[1]
    with zipfile.ZipFile(path) as zf:
      names = zf.namelist()
    code = [n for n in names if ".dist-info/" not in n]
    assert code and all(n.startswith(package + "/") for n in code), dist
    assert not any(n.endswith("_test.py") for n in names), dist


def test_build_is_reproducible(wheels, tmp_path):
  again = wheel_builder.build_all(ROOT, tmp_path, ["stablehlo"])[0]
  assert again.read_bytes() == wheels["openxla_stablehlo"].read_bytes()


def test_stablehlo_wheel_works_alone_in_fresh_venv(wheels, tmp_path):
  venv_dir = tmp_path / "venv"
  # System site-packages supply numpy / ml_dtypes offline; none of our
  # packages are installed there.
  venv.EnvBuilder(system_site_packages=True, with_pip=True).create(venv_dir)
  py = venv_dir / "bin" / "python"
  clean_env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
  subprocess.run(
      [str(py), "-m", "pip", "install", "-q", "--no-index",
       "--find-links", str(wheels["openxla_stablehlo"].parent),
       "openxla-stablehlo"],
      check=True, env=clean_env, cwd=tmp_path)
  script = textwrap.dedent("""
      import importlib.util, json, pathlib
      import stablehlo, support
      from stablehlo import ir, types
      m = ir.Operation("builtin.module", regions=[ir.Region([ir.Block()])])
      module = ir.Module(m)
      f32 = types.RankedTensorType((2, 3), types.f32)
      arg_block = ir.Block([f32, f32])
      add = arg_block.append(ir.Operation(
          "stablehlo.add", arg_block.arguments, [f32]))
      print(json.dumps({
          "stablehlo": str(pathlib.Path(stablehlo.__file__).parent.parent),
          "add": add.name, "rank": add.result.type.rank,
          "functions": len(module.functions),
          "error_is_value_error": issubclass(support.InvalidArgumentError,
                                             ValueError),
          "xla": importlib.util.find_spec("xla") is not None,
          "pjrt": importlib.util.find_spec("pjrt") is not None,
      }))
  """)
  proc = subprocess.run([str(py), "-I", "-c", script], check=True,
                        capture_output=True, text=True, env=clean_env,
                        cwd=tmp_path)
  result = json.loads(proc.stdout)
  assert pathlib.Path(result["stablehlo"]).is_relative_to(venv_dir)
  assert result["add"] == "stablehlo.add" and result["rank"] == 2
  assert result["functions"] == 0
  assert result["error_is_value_error"]
  assert not result["xla"] and not result["pjrt"]
  # The console script runs the interpreter from the installed wheel.
  prog = tmp_path / "p.mlir"
  prog.write_text("func.func @main() -> tensor<2xi32> {\n"
                  "  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>\n"
                  "  %1 = stablehlo.add %0, %0 : tensor<2xi32>\n"
                  "  return %1 : tensor<2xi32>\n}\n")
  proc = subprocess.run(
      [str(venv_dir / "bin" / "stablehlo-translate"), "--interpret",
       str(prog)], capture_output=True, text=True, env=clean_env,
      cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout == "tensor<2xi32> {\n  [2, 4]\n}\n"
  proc = subprocess.run([str(venv_dir / "bin" / "stablehlo-opt"), "--help"],
                        capture_output=True, text=True, env=clean_env)
  assert proc.returncode == 0 and "--inline" in proc.stdout
  listed = subprocess.run([str(py), "-m", "pip", "list"], check=True,
                          capture_output=True, text=True, env=clean_env)
  assert "openxla-support" in listed.stdout
  assert "openxla-xla" not in listed.stdout
  assert "openxla-pjrt" not in listed.stdout


def test_torch_bridge_wheel_in_fresh_venv(wheels, tmp_path):
  """The bridge wheel and those it pulls in, installed offline beside the
  system's torch: the backend entry point, a training step and the export
  round trip (ci/wheels/torch_bridge_smoke.py; ci/check_torch_bridge_wheel
  does the same in a venv with nothing but what pip resolves)."""
  pytest.importorskip("torch")
  venv_dir = tmp_path / "venv"
  # Without pip of its own: the system's pip and setuptools serve the venv
  # (torch requires a newer setuptools than ensurepip installs).
  venv.EnvBuilder(system_site_packages=True, with_pip=False).create(venv_dir)
  py = venv_dir / "bin" / "python"
  clean_env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
  subprocess.run(
      [str(py), "-m", "pip", "install", "-q", "--no-index",
       "--find-links", str(wheels["openxla_torch_bridge"].parent),
       "openxla-torch-bridge"],
      check=True, env=clean_env, cwd=tmp_path)
  proc = subprocess.run(
      [str(py), "-I", str(ROOT / "ci" / "wheels" / "torch_bridge_smoke.py")],
      capture_output=True, text=True, env=clean_env, cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-4000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert pathlib.Path(result["torch_bridge"]).is_relative_to(venv_dir)
  assert not result["torch_loaded"]
  assert result["exported"] == ["manifest.json", "model.mlirbc",
                                "model.shlo-ext"]
