"""Test helpers: locating the real xla_cpu_pjrt plugin (test oracle)."""

from __future__ import annotations

import importlib.util
import os

import pytest

# The PyPI package xla-cpu-pjrt installs the module `xla_plugins.xla_cpu_pjrt`
# with the shared library next to its __init__.py.
_XLA_CPU_PJRT_MODULE = "xla_plugins.xla_cpu_pjrt"
_XLA_CPU_PJRT_LIBRARY = "xla_cpu_pjrt.so"


def xla_cpu_pjrt_path() -> str | None:
  """Path of the installed xla_cpu_pjrt plugin library, or None."""
  try:
    spec = importlib.util.find_spec(_XLA_CPU_PJRT_MODULE)
  except ImportError:
    return None
  if spec is None or not spec.origin:
    return None
  path = os.path.join(os.path.dirname(spec.origin), _XLA_CPU_PJRT_LIBRARY)
  return path if os.path.exists(path) else None


requires_xla_cpu_pjrt = pytest.mark.skipif(
    xla_cpu_pjrt_path() is None,
    reason="the xla-cpu-pjrt package (a real PJRT CPU plugin, "
    "requirements-test.txt) is not installed")
