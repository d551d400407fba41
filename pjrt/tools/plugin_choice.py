"""How the pjrt tools name the plugin to work on.

A choice is one of:
  * a path to a shared library exporting GetPjrtApi (contains a '/' or ends
    in .so / .dylib / .dll);
  * `module:attribute`, a Python plugin: the attribute (a `PJRT_Api`, a
    capsule, or a function returning one) of an importable module, e.g.
    `pjrt._src.plugin.api:get_api` for our CPU plugin;
  * a name pjrt knows (entry point group `pjrt_plugins`, or
    `PJRT_PLUGIN_LIBRARY_PATH="name:path,..."`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any

import pjrt
import support

# Our own CPU plugin (pjrt/_src/plugin), as a `module:attribute` choice.
OUR_PLUGIN = "pjrt._src.plugin.api:get_api"

# The PyPI package xla-cpu-pjrt (a real OpenXLA CPU plugin) installs this
# module with the plugin library next to its __init__.py.
XLA_CPU_PJRT_MODULE = "xla_plugins.xla_cpu_pjrt"


def xla_cpu_pjrt_path() -> str | None:
  """Path of the installed xla_cpu_pjrt plugin library, or None."""
  try:
    spec = importlib.util.find_spec(XLA_CPU_PJRT_MODULE)
  except ImportError:
    return None
  if spec is None or not spec.origin:
    return None
  path = os.path.join(os.path.dirname(spec.origin), "xla_cpu_pjrt.so")
  return path if os.path.exists(path) else None


def is_path(choice: str) -> bool:
  return ("/" in choice or os.sep in choice or
          choice.endswith((".so", ".dylib", ".dll")))


def is_python(choice: str) -> bool:
  module, sep, attribute = choice.partition(":")
  return bool(sep and module and attribute and not is_path(choice))


def absolute(choice: str) -> str:
  """`choice` with a relative library path made absolute (relative to where
  the user typed the command, also under `bazel run`)."""
  if not is_path(choice):
    return choice
  base = os.environ.get("BUILD_WORKING_DIRECTORY") or os.getcwd()
  return os.path.normpath(os.path.join(base, os.path.expanduser(choice)))


def short_name(choice: str) -> str:
  """A readable name: the library's file name, the module, or the name."""
  if is_path(choice):
    base = os.path.basename(choice)
    return base.split(".", 1)[0].removeprefix("lib") or base
  if is_python(choice):
    module = choice.partition(":")[0]
    return "ours" if choice == OUR_PLUGIN else module.rsplit(".", 1)[-1]
  return choice


def load(choice: str) -> pjrt.Plugin:
  """Loads the plugin `choice` names.

  Raises:
    support.NotFoundError: no such library, module or registered name.
    support.XlaError: the plugin cannot be loaded (the loader's errors).
  """
  if is_path(choice):
    return pjrt.load_plugin(absolute(choice))
  if is_python(choice):
    module_name, _, attribute = choice.partition(":")
    try:
      module = importlib.import_module(module_name)
    except ImportError as e:
      raise support.NotFoundError(
          f"cannot import plugin module {module_name}: {e}") from e
    source: Any = module
    for part in attribute.split("."):
      try:
        source = getattr(source, part)
      except AttributeError:
        raise support.NotFoundError(
            f"module {module_name} has no {attribute}") from None
    return pjrt.load_plugin(source, name=short_name(choice))
  return pjrt.get_plugin(choice)
