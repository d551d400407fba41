"""Builds one pure-Python wheel per component straight from the source tree.

A wheel is a zip with a fixed layout (PEP 427 / PEP 491); writing it here
keeps the build offline and reproducible with no build backend to install
(setuptools' `wheel` package is not among our pinned dependencies). Files
are written in sorted order with a fixed timestamp, so the same tree always
gives byte-identical wheels.
"""

from __future__ import annotations

import base64
import hashlib
import pathlib
import re
import zipfile

from ci.wheels import components as comp

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
# What goes into a wheel: the package's Python sources, minus tests and the
# build files and fixtures that only serve development.
_EXCLUDE = re.compile(r"(^|/)(testdata|__pycache__)(/|$)|_test\.py$")


def read_pins(requirements: pathlib.Path) -> dict[str, str]:
  """name (normalized) -> pinned version, from a requirements file."""
  pins = {}
  for line in requirements.read_text().splitlines():
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-"):
      continue
    name, _, version = line.partition("==")
    pins[_normalize(name)] = version.strip()
  return pins


def _normalize(name: str) -> str:
  return re.sub(r"[-_.]+", "-", name).lower()


def _requires(c: comp.Component, pins: dict[str, str]) -> list[str]:
  reqs = [f"{comp.BY_PACKAGE[o].distribution}=={comp.VERSION}"
          for o in c.ours]
  for name in c.third_party:
    if re.search(r"[<>=!~]", name):
      reqs.append(name)
      continue
    version = pins.get(_normalize(name))
    reqs.append(f"{name}>={version},<{_next_breaking(version)}"
                if version else name)
  return reqs


def _next_breaking(version: str) -> str:
  """The first release that may break what the pin was tested with.

  Semantic versioning: the next major, or for a 0.x project the next minor.
  An open upper bound let pip pick llvmlite 0.50 for a fresh install, whose
  `create_pipeline_tuning_options` no longer takes `size_level`, and every
  compilation failed.
  """
  parts = [int(p) for p in re.findall(r"\d+", version)[:2]]
  major, minor = (parts + [0])[:2]
  return f"0.{minor + 1}" if major == 0 else f"{major + 1}"


def package_files(root: pathlib.Path, package: str) -> list[pathlib.Path]:
  base = root / package
  files = []
  for path in sorted(base.rglob("*.py")):
    rel = path.relative_to(root).as_posix()
    if not _EXCLUDE.search(rel):
      files.append(path)
  return files


def _record_line(name: str, data: bytes) -> str:
  digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
  return f"{name},sha256={digest.rstrip(b'=').decode()},{len(data)}"


def build_wheel(root: pathlib.Path, c: comp.Component,
                out_dir: pathlib.Path) -> pathlib.Path:
  pins = read_pins(root / "requirements.txt")
  dist = c.distribution.replace("-", "_")
  info = f"{dist}-{comp.VERSION}.dist-info"
  out_dir.mkdir(parents=True, exist_ok=True)
  wheel_path = out_dir / f"{dist}-{comp.VERSION}-py3-none-any.whl"

  entries: list[tuple[str, bytes]] = []
  for path in package_files(root, c.package):
    entries.append((path.relative_to(root).as_posix(), path.read_bytes()))
  metadata = [
      "Metadata-Version: 2.1",
      f"Name: {c.distribution}",
      f"Version: {comp.VERSION}",
      f"Summary: {c.summary}",
      "Requires-Python: >=3.10",
  ] + [f"Requires-Dist: {r}" for r in _requires(c, pins)]
  entries.append((f"{info}/METADATA", ("\n".join(metadata) + "\n").encode()))
  entries.append((f"{info}/WHEEL", (
      "Wheel-Version: 1.0\nGenerator: openxla-ci-wheel-builder\n"
      "Root-Is-Purelib: true\nTag: py3-none-any\n").encode()))
  entries.append((f"{info}/top_level.txt", f"{c.package}\n".encode()))
  if c.entry_points:
    groups: dict[str, list[str]] = {}
    for group, name, value in c.entry_points:
      groups.setdefault(group, []).append(f"{name} = {value}")
    text = "".join(f"[{g}]\n" + "\n".join(lines) + "\n\n"
                   for g, lines in sorted(groups.items()))
    entries.append((f"{info}/entry_points.txt", text.encode()))
  record = [_record_line(n, d) for n, d in entries] + [f"{info}/RECORD,,"]
  entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))

  with zipfile.ZipFile(wheel_path, "w", zipfile.ZIP_DEFLATED) as zf:
    for name, data in entries:
      zi = zipfile.ZipInfo(name, _FIXED_TIME)
      zi.compress_type = zipfile.ZIP_DEFLATED
      zi.external_attr = 0o644 << 16
      zf.writestr(zi, data)
  return wheel_path


def build_all(root: pathlib.Path, out_dir: pathlib.Path,
              packages=None) -> list[pathlib.Path]:
  chosen = [comp.BY_PACKAGE[p] for p in packages] if packages else list(
      comp.COMPONENTS)
  return [build_wheel(root, c, out_dir) for c in chosen]
