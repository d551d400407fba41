"""Test helper: a directory that makes JAX find the plugin through its
"jax_plugins" entry point, as installing the openxla-pjrt wheel would."""

from __future__ import annotations

import pathlib


def plugin_site(directory: pathlib.Path) -> pathlib.Path:
  """Writes openxla-pjrt's dist-info (entry points only) into `directory`,
  to put on a child interpreter's PYTHONPATH; returns `directory`."""
  dist = directory / "openxla_pjrt-0.1.0.dist-info"
  dist.mkdir()
  (dist / "METADATA").write_text(
      "Metadata-Version: 2.1\nName: openxla-pjrt\nVersion: 0.1.0\n")
  (dist / "entry_points.txt").write_text(
      "[jax_plugins]\nopenxla_cpu = pjrt.jax_plugin\n")
  return directory
