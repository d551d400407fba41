"""Conformance: the PJRT_Api table, its version, and the plugin attributes."""

import ctypes

import pytest

import pjrt
import support
from pjrt.cts import harness

abi = pjrt.abi

# The oldest minor version jaxlib accepts (with matching major version).
_JAX_MINIMUM_MINOR = 29

# A PJRT_Api bigger than this is not a function table but a broken size.
_MAX_API_STRUCT_SIZE = 64 * 1024

# Slots that may be NULL inside the plugin's struct_size. None: jaxlib calls
# several slots without a NULL check, so a slot a plugin does not implement
# must still be a function that returns an UNIMPLEMENTED error.
_OPTIONAL_SLOTS: frozenset[str] = frozenset()

# The functions jaxlib 0.10.2 calls for `jax.jit(lambda x: x + 1)(x)`; a
# plugin lacking any of them cannot be used from JAX.
_JAX_REQUIRED_SLOTS = (
    "Error_Destroy", "Error_Message", "Error_GetCode", "Error_ForEachPayload",
    "Plugin_Initialize", "Plugin_Attributes",
    "Client_Create", "Client_Destroy", "Client_PlatformName",
    "Client_PlatformVersion", "Client_Devices", "Client_AddressableDevices",
    "Client_AddressableMemories", "Client_LookupDevice",
    "Client_BufferFromHostBuffer", "Client_Compile",
    "DeviceDescription_Id", "DeviceDescription_ProcessIndex",
    "DeviceDescription_Attributes", "DeviceDescription_Kind",
    "DeviceDescription_DebugString", "DeviceDescription_ToString",
    "Device_GetDescription", "Device_IsAddressable", "Device_LocalHardwareId",
    "Device_AddressableMemories", "Device_DefaultMemory",
    "Memory_Kind", "Memory_AddressableByDevices",
    "Event_OnReady", "Event_Destroy",
    "Buffer_Destroy", "Buffer_Device", "Buffer_Memory", "Buffer_Dimensions",
    "Buffer_ElementType", "Buffer_IsDeleted", "Buffer_IsOnCpu",
    "Buffer_ToHostBuffer",
    "Executable_NumReplicas", "Executable_NumPartitions",
    "Executable_NumOutputs", "Executable_Destroy",
    "LoadedExecutable_GetExecutable", "LoadedExecutable_AddressableDevices",
    "LoadedExecutable_GetDeviceAssignment", "LoadedExecutable_Execute",
    "LoadedExecutable_Destroy",
)
# Error_ForEachPayload lies past the end of older tables; jaxlib checks the
# struct size before calling it.
_JAX_REQUIRED_IF_INSIDE = frozenset({"Error_ForEachPayload"})

_POINTER_SIZE = ctypes.sizeof(ctypes.c_void_p)


@pytest.fixture(scope="module")
def api(plugin_choice):
  return harness.raw_api(plugin_choice)


def _slots_inside(api) -> list[str]:
  return [s for s in abi.SLOTS
          if abi.slot_offset(s) + _POINTER_SIZE <= api.struct_size]


def test_major_version_matches(api):
  major, minor = abi.api_version(api)
  assert major == abi.API_MAJOR, (
      f"plugin implements PJRT C API {major}.{minor}; clients speak major "
      f"version {abi.API_MAJOR}")


def test_minor_version_accepted_by_jax(api):
  _, minor = abi.api_version(api)
  assert minor >= _JAX_MINIMUM_MINOR


def test_version_struct_size(api):
  size = api.pjrt_api_version.struct_size
  assert size >= abi.PJRT_Api_Version.STRUCT_SIZE
  assert size <= 4096


def test_api_struct_size_within_bounds(api):
  size = api.struct_size
  assert size >= abi.FIRST_SLOT_OFFSET + 3 * _POINTER_SIZE, (
      f"PJRT_Api struct_size {size} leaves no room for the error functions")
  assert size <= _MAX_API_STRUCT_SIZE
  assert (size - abi.FIRST_SLOT_OFFSET) % _POINTER_SIZE == 0, (
      f"PJRT_Api struct_size {size} does not end on a function slot")


def test_api_struct_size_agrees_with_version(api):
  # Fields are only appended: a plugin of our minor version has our table,
  # a newer one at least our table, an older one at most.
  _, minor = abi.api_version(api)
  ours = abi.PJRT_Api.STRUCT_SIZE
  if minor == abi.API_MINOR:
    assert api.struct_size == ours
  elif minor > abi.API_MINOR:
    assert api.struct_size >= ours
  else:
    assert api.struct_size <= ours


def test_every_slot_inside_struct_size_is_set(api):
  missing = [s for s in _slots_inside(api)
             if s not in _OPTIONAL_SLOTS and not abi.has_slot(api, s)]
  assert not missing, (
      "NULL function slots inside the plugin's struct_size (unimplemented "
      f"functions must return UNIMPLEMENTED instead): {missing}")


def test_slots_jax_requires_are_present(api):
  inside = set(_slots_inside(api))
  missing = [s for s in _JAX_REQUIRED_SLOTS
             if not abi.has_slot(api, s) and
             (s in inside or s not in _JAX_REQUIRED_IF_INSIDE)]
  assert not missing, f"slots jaxlib needs are missing: {missing}"


# -- Argument structs. -------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["api.args_struct_size_too_small", "api.args_struct_size_zero"],
    ids=harness.probe_id)
def test_too_small_args_struct_is_rejected(probe, name):
  # A struct_size below what the plugin needs means a caller built against
  # an incompatible header; the plugin must refuse, not read past it.
  harness.expect_error(probe(name), {support.StatusCode.INVALID_ARGUMENT})


# -- Plugin attributes. ------------------------------------------------------


def _raw_attributes(plugin) -> list[tuple[str, int, object]]:
  """[(name, PJRT_NamedValue_Type, value)], duplicates kept."""
  if not plugin.has("Plugin_Attributes"):
    pytest.fail("the plugin has no PJRT_Plugin_Attributes")
  args = plugin.call("Plugin_Attributes")
  assert args.num_attributes == 0 or args.attributes, (
      "num_attributes > 0 but attributes is NULL")
  result = []
  for i in range(args.num_attributes):
    value = args.attributes[i]
    name = _read_string(value.name, value.name_size)
    one = _decode_value(value)
    result.append((name, int(value.type), one))
  return result


def _read_string(pointer, size) -> str:
  if not pointer or not size:
    return ""
  return ctypes.string_at(pointer, size).decode("utf-8")


def _decode_value(value):
  kind = value.type
  if kind == abi.NamedValueType.STRING:
    return _read_string(value.string_value, value.value_size)
  if kind == abi.NamedValueType.INT64:
    return int(value.int64_value)
  if kind == abi.NamedValueType.INT64_LIST:
    return [int(value.int64_array_value[j]) for j in range(value.value_size)]
  if kind == abi.NamedValueType.FLOAT:
    return float(value.float_value)
  if kind == abi.NamedValueType.BOOL:
    return bool(value.bool_value)
  return None


@pytest.fixture(scope="module")
def attributes(plugin):
  return _raw_attributes(plugin)


def test_attribute_names_are_unique_and_non_empty(attributes):
  names = [name for name, _, _ in attributes]
  assert all(names), f"an attribute has an empty name: {names}"
  duplicates = sorted({n for n in names if names.count(n) > 1})
  assert not duplicates, f"duplicate plugin attributes: {duplicates}"


def test_attribute_types_are_valid(attributes):
  valid = {t.value for t in abi.NamedValueType}
  bad = [(name, kind) for name, kind, _ in attributes if kind not in valid]
  assert not bad, f"attributes with an unknown PJRT_NamedValue_Type: {bad}"


def test_stablehlo_versions(attributes):
  values = {name: value for name, _, value in attributes}
  reported = [n for n in ("stablehlo_current_version",
                          "stablehlo_minimum_version") if n in values]
  if not reported:
    pytest.skip("the plugin reports no StableHLO versions")
  assert len(reported) == 2, (
      f"only {reported[0]} is reported; frameworks need both")
  current = values["stablehlo_current_version"]
  minimum = values["stablehlo_minimum_version"]
  for version in (current, minimum):
    assert isinstance(version, list) and len(version) == 3, version
    assert all(v >= 0 for v in version), version
  assert minimum <= current


def test_xla_version_is_an_int(attributes):
  values = {name: (kind, value) for name, kind, value in attributes}
  if "xla_version" not in values:
    pytest.skip("the plugin reports no xla_version")
  kind, value = values["xla_version"]
  assert kind == abi.NamedValueType.INT64, value
  assert value >= 0


# -- Platform. ---------------------------------------------------------------


def test_platform(client):
  assert client.platform_name
  assert isinstance(client.platform_version, str)
  assert client.process_index >= 0
