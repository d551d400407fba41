"""Tests of how the pjrt tools name plugins (plugin_choice.py)."""

import os

import pytest

import support
from pjrt._src import test_util
from pjrt.tools import plugin_choice


@pytest.mark.parametrize("choice, path, python, short", [
    ("/x/libfoo.so", True, False, "foo"),
    ("plugins/bar.so.1", True, False, "bar"),
    ("baz.so", True, False, "baz"),
    ("pkg.mod:get_api", False, True, "mod"),
    (plugin_choice.OUR_PLUGIN, False, True, "ours"),
    ("cpu", False, False, "cpu"),
])
def test_kinds_of_choice(choice, path, python, short):
  assert plugin_choice.is_path(choice) is path
  assert plugin_choice.is_python(choice) is python
  assert plugin_choice.short_name(choice) == short


def test_absolute_only_touches_paths(monkeypatch, tmp_path):
  monkeypatch.setenv("BUILD_WORKING_DIRECTORY", str(tmp_path))
  assert plugin_choice.absolute("a/b.so") == os.path.join(tmp_path, "a/b.so")
  assert plugin_choice.absolute("pkg.mod:f") == "pkg.mod:f"
  assert plugin_choice.absolute("cpu") == "cpu"


def test_load_errors():
  with pytest.raises(support.NotFoundError, match="cannot import"):
    plugin_choice.load("no_such_module_xyz:get_api")
  with pytest.raises(support.NotFoundError, match="has no"):
    plugin_choice.load("os.path:no_such_function")
  with pytest.raises(support.NotFoundError):
    plugin_choice.load("no_such_registered_plugin_xyz")


@test_util.requires_xla_cpu_pjrt
def test_load_a_library():
  plugin = plugin_choice.load(test_util.xla_cpu_pjrt_path())
  assert plugin.version[0] == 0 and plugin.has("Client_Create")
