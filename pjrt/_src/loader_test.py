"""Tests of plugin loading, error translation and the plugin registry.

Most tests run against a fake plugin built in Python (a PJRT_Api whose
slots are ctypes thunks), so they need no shared library; a few load the
real xla_cpu_pjrt plugin where it is installed.
"""

import ctypes
import importlib.metadata
import itertools
import os

import _ctypes
import pytest

import support
from pjrt._src import abi
from pjrt._src import loader
from pjrt._src import test_util


class FakePlugin:
  """A PJRT_Api implemented in Python, with a few slots filled in."""

  def __init__(self, *, major=0, minor=abi.API_MINOR, attributes=None,
               num_slots=len(abi.SLOTS)):
    self.api = abi.PJRT_Api()
    self.api.struct_size = abi.FIRST_SLOT_OFFSET + 8 * num_slots
    self.api.pjrt_api_version.struct_size = abi.PJRT_Api_Version.STRUCT_SIZE
    self.api.pjrt_api_version.major_version = major
    self.api.pjrt_api_version.minor_version = minor
    self.errors = {}  # handle -> (code, message bytes)
    self.destroyed = []
    self.initialize_calls = 0
    self.create_error = (support.StatusCode.NOT_FOUND, b"no such client")
    self._ids = itertools.count(0x1000)
    self._thunks = []
    self._attributes = loader.encode_named_values(attributes or {
        "xla_version": 2,
        "stablehlo_current_version": [1, 17, 0],
        "stablehlo_minimum_version": [0, 9, 0],
    })
    for slot in ("Error_Destroy", "Error_Message", "Error_GetCode",
                 "Plugin_Initialize", "Plugin_Attributes", "Client_Create"):
      if abi.slot_offset(slot) < self.api.struct_size:
        self._install(slot, getattr(self, "_" + slot.lower()))

  def _install(self, slot, function):
    thunk = abi.function_type(slot)(function)
    self._thunks.append(thunk)
    setattr(self.api, "PJRT_" + slot, ctypes.cast(thunk, ctypes.c_void_p))

  def make_error(self, code, message):
    handle = next(self._ids)
    self.errors[handle] = (int(code), message)
    return handle

  def _error_destroy(self, args):
    self.destroyed.append(args.contents.error)
    self.errors.pop(args.contents.error, None)

  def _error_message(self, args):
    message = self.errors[args.contents.error][1]
    buf = ctypes.create_string_buffer(message)
    self._thunks.append(buf)
    args.contents.message = ctypes.addressof(buf)
    args.contents.message_size = len(message)

  def _error_getcode(self, args):
    args.contents.code = self.errors[args.contents.error][0]
    return None

  def _plugin_initialize(self, args):
    del args
    self.initialize_calls += 1
    return None

  def _plugin_attributes(self, args):
    args.contents.attributes = ctypes.cast(self._attributes,
                                           abi.NAMED_VALUE_P)
    args.contents.num_attributes = len(self._attributes)
    return None

  def _client_create(self, args):
    del args
    return self.make_error(*self.create_error)


@pytest.fixture(autouse=True)
def _clean_registry(monkeypatch):
  monkeypatch.delenv(loader.LIBRARY_PATH_ENV, raising=False)
  loader._reset_registry_for_tests()  # pylint: disable=protected-access
  yield
  loader._reset_registry_for_tests()  # pylint: disable=protected-access


def test_named_values_round_trip():
  values = {"s": "héllo", "i": -7, "l": [1, 2, 3], "f": 0.5, "b": True,
            "empty": []}
  array = loader.encode_named_values(values)
  assert array[0].struct_size == abi.PJRT_NamedValue.STRUCT_SIZE
  assert loader.decode_named_values(array, len(values)) == values
  assert loader.encode_named_values({}) is None


def test_named_values_reject_other_types():
  with pytest.raises(support.InvalidArgumentError, match="option 'x'"):
    loader.encode_named_values({"x": object()})


def test_named_values_reject_duplicates():
  array = loader.encode_named_values({"a": 1, "b": 2})
  array[1].name = array[0].name
  with pytest.raises(support.InvalidArgumentError, match="duplicate"):
    loader.decode_named_values(array, 2)


def test_fake_plugin_loads_and_initializes_once():
  fake = FakePlugin()
  plugin = loader.load_plugin(fake.api, name="fake")
  assert plugin.name == "fake"
  assert plugin.version == (0, abi.API_MINOR)
  assert fake.initialize_calls == 1
  assert loader.load_plugin(plugin) is plugin
  assert fake.initialize_calls == 1
  assert plugin.attributes()["stablehlo_current_version"] == [1, 17, 0]
  assert plugin.stablehlo_current_version == (1, 17, 0)
  assert plugin.stablehlo_minimum_version == (0, 9, 0)
  assert plugin.xla_version == 2


def test_error_becomes_support_error_and_is_destroyed():
  fake = FakePlugin()
  plugin = loader.load_plugin(fake.api, name="fake")
  with pytest.raises(support.NotFoundError, match="no such client") as info:
    plugin.call("Client_Create")
  assert info.value.code == support.StatusCode.NOT_FOUND
  assert isinstance(info.value, LookupError)
  assert len(fake.destroyed) == 1 and not fake.errors


@pytest.mark.parametrize("code,error_type", [
    (support.StatusCode.INVALID_ARGUMENT, support.InvalidArgumentError),
    (support.StatusCode.UNIMPLEMENTED, support.UnimplementedError),
    (support.StatusCode.OK, support.UnknownError),
    (99, support.UnknownError),
])
def test_error_codes(code, error_type):
  fake = FakePlugin()
  fake.create_error = (code, b"boom")
  plugin = loader.load_plugin(fake.api, name="fake")
  with pytest.raises(error_type, match="boom"):
    plugin.call("Client_Create")
  assert not fake.errors


def test_missing_slot_is_unimplemented():
  plugin = loader.load_plugin(FakePlugin().api, name="fake")
  assert not plugin.has("Client_Devices")
  with pytest.raises(support.UnimplementedError,
                     match="does not implement PJRT_Client_Devices"):
    plugin.call("Client_Devices")


def test_shorter_table_hides_later_slots():
  fake = FakePlugin(num_slots=118, minor=81)
  plugin = loader.load_plugin(fake.api, name="old")
  assert plugin.version == (0, 81)
  assert not plugin.has("Client_CreateErrorBuffer")
  assert plugin.has("Client_Create")


def test_major_version_mismatch_is_rejected():
  with pytest.raises(support.FailedPreconditionError,
                     match=r"PJRT C API 1\.3.*0\.112.*major versions"):
    loader.load_plugin(FakePlugin(major=1, minor=3).api, name="future")


def test_table_without_error_functions_is_rejected():
  with pytest.raises(support.FailedPreconditionError, match="Error_GetCode"):
    loader.load_plugin(FakePlugin(num_slots=2).api, name="tiny")


@pytest.mark.parametrize("attributes,message", [
    ({"xla_version": "two"}, "xla_version must be an int64"),
    ({"stablehlo_current_version": [1, 2]}, "3 non-negative"),
    ({"stablehlo_current_version": [1, 0, 0],
      "stablehlo_minimum_version": [1, 1, 0]}, "is newer than"),
])
def test_bad_attributes_are_rejected(attributes, message):
  fake = FakePlugin(attributes=attributes)
  with pytest.raises(support.FailedPreconditionError, match=message):
    loader.load_plugin(fake.api, name="bad")


def test_load_from_capsule_and_address():
  fake = FakePlugin()
  new_capsule = ctypes.pythonapi.PyCapsule_New
  new_capsule.restype = ctypes.py_object
  new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
  capsule = new_capsule(ctypes.addressof(fake.api), b"pjrt_c_api", None)
  plugin = loader.load_plugin(capsule, name="capsule")
  assert plugin.api_address == ctypes.addressof(fake.api)
  assert loader.load_plugin(ctypes.addressof(fake.api)).version[0] == 0
  wrong = new_capsule(ctypes.addressof(fake.api), b"other", None)
  with pytest.raises(support.InvalidArgumentError, match="named b'other'"):
    loader.load_plugin(wrong)


def test_load_rejects_other_objects():
  with pytest.raises(support.InvalidArgumentError, match="cannot make"):
    loader.load_plugin(3.5)
  with pytest.raises(support.InternalError, match="NULL"):
    loader.load_plugin(0)


def test_load_missing_or_bad_library(tmp_path):
  with pytest.raises(support.NotFoundError, match="does not exist"):
    loader.load_plugin(str(tmp_path / "missing.so"))
  not_elf = tmp_path / "not_a_library.so"
  not_elf.write_text("hello")
  with pytest.raises(support.InvalidArgumentError, match="cannot load"):
    loader.load_plugin(str(not_elf))
  # A real shared library that is not a PJRT plugin.
  with pytest.raises(support.InvalidArgumentError, match="GetPjrtApi"):
    loader.load_plugin(_ctypes.__file__)


def test_parse_library_path_env():
  value = "a:/x/y.so, /p/libfoo.so.1,,b:rel/p.so,xla_cpu_pjrt.so"
  assert loader.parse_library_path_env(value) == [
      ("a", "/x/y.so"), ("foo", "/p/libfoo.so.1"), ("b", "rel/p.so"),
      ("xla_cpu_pjrt", "xla_cpu_pjrt.so")]
  assert loader.parse_library_path_env("") == []
  # Plugin names may contain dots.
  assert loader.parse_library_path_env("my.plugin:/x/lib.so") == [
      ("my.plugin", "/x/lib.so")]


def test_registry():
  fake = FakePlugin()
  loader.register_plugin("fake", fake.api)
  loader.register_plugin("fake", fake.api)  # Same source: no error.
  with pytest.raises(support.AlreadyExistsError, match="already registered"):
    loader.register_plugin("fake", FakePlugin().api)
  plugin = loader.get_plugin("fake")
  assert plugin.name == "fake"
  assert loader.get_plugin("fake") is plugin
  other = FakePlugin()
  loader.register_plugin("fake", other.api, replace=True)
  assert loader.get_plugin("fake").api_address == ctypes.addressof(other.api)
  loader.register_plugin("second", FakePlugin().api)
  assert {"fake", "second"} <= set(loader.registered_plugins())
  loader.unregister_plugin("second")
  with pytest.raises(support.NotFoundError, match="no PJRT plugin named"):
    loader.get_plugin("second")


def test_register_missing_path():
  with pytest.raises(support.NotFoundError):
    loader.register_plugin("x", "/definitely/not/here.so")


@test_util.requires_xla_cpu_pjrt
def test_real_plugin_loads():
  plugin = loader.load_plugin(test_util.xla_cpu_pjrt_path())
  assert plugin.name == "xla_cpu_pjrt"
  major, minor = plugin.version
  assert major == 0 and 29 <= minor <= abi.API_MINOR
  assert plugin.has("Client_Create")
  attributes = plugin.attributes()
  assert isinstance(attributes["xla_version"], int)
  assert len(attributes["stablehlo_current_version"]) == 3
  assert plugin.stablehlo_minimum_version <= plugin.stablehlo_current_version
  # Loading the same library again returns the same (initialized) plugin.
  assert loader.load_plugin(test_util.xla_cpu_pjrt_path()) is plugin


@test_util.requires_xla_cpu_pjrt
def test_discovery_from_environment(monkeypatch):
  path = test_util.xla_cpu_pjrt_path()
  monkeypatch.setenv(loader.LIBRARY_PATH_ENV, f"cpu_env:{path},{path}")
  plugin = loader.get_plugin("cpu_env")
  assert plugin.path is not None
  assert os.path.samefile(plugin.path, path)
  assert {"cpu_env", "xla_cpu_pjrt"} <= set(loader.registered_plugins())


@test_util.requires_xla_cpu_pjrt
def test_discovery_from_entry_points(monkeypatch):
  entry_point = importlib.metadata.EntryPoint(
      name="cpu_ep", value="pjrt._src.test_util:xla_cpu_pjrt_path",
      group=loader.ENTRY_POINT_GROUP)
  real_entry_points = importlib.metadata.entry_points

  def fake_entry_points(**kwargs):
    if kwargs.get("group") == loader.ENTRY_POINT_GROUP:
      return [entry_point]
    return real_entry_points(**kwargs)

  monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
  assert "cpu_ep" in loader.discover_plugins()
  assert loader.get_plugin("cpu_ep").version[0] == 0
  # An explicit registration is not overridden by discovery.
  loader.register_plugin("mine", FakePlugin().api)
  monkeypatch.setenv(loader.LIBRARY_PATH_ENV,
                     f"mine:{test_util.xla_cpu_pjrt_path()}")
  loader.discover_plugins()
  assert loader.get_plugin("mine").path is None
