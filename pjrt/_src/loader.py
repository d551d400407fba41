"""Loading PJRT plugins and keeping a registry of them by name.

A plugin is a `const PJRT_Api*`. It comes from a shared library exporting
`PJRT_Api* GetPjrtApi()` (the PJRT plugin convention), or from a Python
object that already holds one: a `PJRT_Api` ctypes struct (our own plugins),
a PyCapsule named "pjrt_c_api" (what JAX passes around), an address, or an
object with `get_library_path()`.

`Plugin` wraps the table: it checks the version, calls `PJRT_Plugin_Initialize`
once, calls slots by name and turns a returned `PJRT_Error*` into the
`support` error of the same code (destroying the PJRT_Error).

The registry maps names to plugins. Besides `register_plugin`, plugins are
discovered (once, on the first lookup, or on `discover_plugins()`) from:
  * the entry-point group `pjrt_plugins`: entry name = plugin name, the loaded
    object is anything `register_plugin` accepts (a path, a callable returning
    one, a module with `get_library_path()`, ...);
  * the environment variable `PJRT_PLUGIN_LIBRARY_PATH`: comma-separated
    `name:path` items, or bare paths whose plugin name is the file name
    without `lib` prefix and extension.
An explicit `register_plugin` wins over discovery; the environment wins over
entry points.
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.metadata
import os
import threading
import types
from typing import Any, Callable

import support
from pjrt._src import abi

ENTRY_POINT_GROUP = "pjrt_plugins"
LIBRARY_PATH_ENV = "PJRT_PLUGIN_LIBRARY_PATH"
CAPSULE_NAME = b"pjrt_c_api"

# Slots without which not even an error can be reported.
_ERROR_SLOTS = ("Error_Destroy", "Error_Message", "Error_GetCode")

# Attributes frameworks read, and the value type each must have.
_INT64_ATTRIBUTES = ("xla_version",)
_VERSION_ATTRIBUTES = ("stablehlo_current_version",
                       "stablehlo_minimum_version")


def read_string(pointer: int | None, size: int) -> str:
  """Decodes `size` bytes at `pointer` (not NUL-terminated) as UTF-8."""
  if not pointer or not size:
    return ""
  return ctypes.string_at(pointer, size).decode("utf-8", errors="replace")


def decode_named_values(values: Any, count: int) -> dict[str, Any]:
  """PJRT_NamedValue[count] -> {name: str | int | list[int] | float | bool}.

  Raises:
    support.InvalidArgumentError: on an unknown value type or a duplicate name.
  """
  result: dict[str, Any] = {}
  for i in range(count):
    value = values[i]
    name = read_string(value.name, value.name_size)
    kind = value.type
    if kind == abi.NamedValueType.STRING:
      decoded = read_string(value.string_value, value.value_size)
    elif kind == abi.NamedValueType.INT64:
      decoded = int(value.int64_value)
    elif kind == abi.NamedValueType.INT64_LIST:
      decoded = [int(value.int64_array_value[j])
                 for j in range(value.value_size)]
    elif kind == abi.NamedValueType.FLOAT:
      decoded = float(value.float_value)
    elif kind == abi.NamedValueType.BOOL:
      decoded = bool(value.bool_value)
    else:
      raise support.InvalidArgumentError(
          f"named value {name!r} has unknown PJRT_NamedValue_Type {kind}")
    if name in result:
      raise support.InvalidArgumentError(f"duplicate named value {name!r}")
    result[name] = decoded
  return result


def encode_named_values(options: dict[str, Any] | None) -> Any:
  """{name: value} -> a ctypes PJRT_NamedValue array (None when empty).

  bool -> kBool, int -> kInt64, float -> kFloat, str -> kString, a sequence
  of ints -> kInt64List. The array keeps its strings and lists alive.

  Raises:
    support.InvalidArgumentError: for a value of another type.
  """
  if not options:
    return None
  array = (abi.PJRT_NamedValue * len(options))()
  keep = []
  for slot, (name, value) in zip(array, options.items()):
    abi.set_fields(slot, struct_size=abi.PJRT_NamedValue.STRUCT_SIZE,
                   name=name, name_size=len(name.encode("utf-8")))
    keep.extend(abi.kept_alive(slot))
    if isinstance(value, bool):
      slot.type, slot.bool_value, slot.value_size = (
          abi.NamedValueType.BOOL, value, 1)
    elif isinstance(value, int):
      slot.type, slot.int64_value, slot.value_size = (
          abi.NamedValueType.INT64, value, 1)
    elif isinstance(value, float):
      slot.type, slot.float_value, slot.value_size = (
          abi.NamedValueType.FLOAT, value, 1)
    elif isinstance(value, str):
      data = value.encode("utf-8")
      buf = ctypes.create_string_buffer(data, len(data) + 1)
      keep.append(buf)
      slot.type, slot.string_value, slot.value_size = (
          abi.NamedValueType.STRING, ctypes.addressof(buf), len(data))
    elif (isinstance(value, (list, tuple)) and
          all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
      ints = (ctypes.c_int64 * max(1, len(value)))(*value)
      keep.append(ints)
      slot.type, slot.value_size = abi.NamedValueType.INT64_LIST, len(value)
      slot.int64_array_value = ctypes.cast(ints, abi.INT64_P)
    else:
      raise support.InvalidArgumentError(
          f"option {name!r}: cannot pass a {type(value).__name__} as a "
          "PJRT_NamedValue (use str, int, float, bool or a list of ints)")
  abi.keep_alive(array, *keep)
  return array


class Plugin:
  """A loaded PJRT plugin: its `PJRT_Api` table and helpers to call it.

  Attributes:
    name: the name it is registered under (or was loaded with).
    path: the shared library it came from, or None.
    api: the plugin's `PJRT_Api` struct (a view of the plugin's memory).
    version: (major, minor) the plugin reports.
  """

  def __init__(self, api_address: int, *, name: str,
               path: str | None = None, owner: Any = None):
    if not api_address:
      raise support.InternalError(f"plugin {name!r}: PJRT_Api is NULL")
    self.name = name
    self.path = path
    # Whatever owns the table's memory (the CDLL, a ctypes struct, ...).
    self._owner = owner
    self.api = abi.PJRT_Api.from_address(api_address)
    self.version = abi.api_version(self.api)
    self._functions: dict[str, Callable[..., Any] | None] = {}
    self._destroyers: dict[str, tuple[Callable[..., Any] | None, Any]] = {}
    self._lock = threading.Lock()
    self._initialized = False
    self._attributes: dict[str, Any] | None = None
    self._check_version()

  def __repr__(self) -> str:
    major, minor = self.version
    where = f" from {self.path}" if self.path else ""
    return f"<Plugin {self.name!r} PJRT C API {major}.{minor}{where}>"

  @property
  def api_address(self) -> int:
    return ctypes.addressof(self.api)

  def _describe(self) -> str:
    where = f" ({self.path})" if self.path else ""
    return f"PJRT plugin {self.name!r}{where}"

  def _check_version(self) -> None:
    major, minor = self.version
    if major != abi.API_MAJOR:
      raise support.FailedPreconditionError(
          f"{self._describe()} implements PJRT C API {major}.{minor}, but "
          f"this client speaks {abi.API_MAJOR}.{abi.API_MINOR}; the major "
          "versions must match")
    missing = [s for s in _ERROR_SLOTS if not abi.has_slot(self.api, s)]
    if missing:
      raise support.FailedPreconditionError(
          f"{self._describe()} has no {', '.join(missing)} (PJRT_Api "
          f"struct_size {self.api.struct_size})")

  # -- Calling slots. ------------------------------------------------------

  def has(self, slot: str) -> bool:
    """Whether the plugin implements `slot` (inside its table, non-NULL)."""
    return self.function(slot) is not None

  def function(self, slot: str) -> Callable[..., Any] | None:
    fn = self._functions.get(slot, ...)
    if fn is ...:
      fn = abi.slot_function(self.api, slot)
      self._functions[slot] = fn
    return fn

  def destroyer(self, slot: str) -> tuple[Callable[..., Any] | None, Any]:
    """(function, args type) of `slot` (cached: clients destroy every
    buffer and event through it)."""
    found = self._destroyers.get(slot)
    if found is None:
      found = self._destroyers.setdefault(
          slot, (self.function(slot), abi.args_type(slot)))
    return found

  def call(self, slot: str, args: Any = None, **fields: Any) -> Any:
    """Calls `slot` and returns its args struct (outputs are read from it).

    Args:
      slot: the function, e.g. "Client_PlatformName".
      args: a prepared args struct; when None, one is made from `fields`.
      **fields: field values for `abi.make_args`.

    Raises:
      support.UnimplementedError: when the plugin lacks `slot`.
      support.XlaError: the error the plugin returned, by its code.
    """
    fn = self.function(slot)
    if fn is None:
      major, minor = self.version
      raise support.UnimplementedError(
          f"{self._describe()} (PJRT C API {major}.{minor}) does not "
          f"implement PJRT_{slot}")
    if args is None:
      args = abi.make_args(abi.args_type(slot), **fields)
    elif fields:
      abi.set_fields(args, **fields)
    error = fn(ctypes.byref(args))
    if error:
      raise self.take_error(error)
    return args

  def take_error(self, error: int) -> support.XlaError:
    """Converts a `PJRT_Error*` to a support error and destroys it."""
    try:
      code_args = abi.make_args(abi.PJRT_Error_GetCode_Args, error=error)
      nested = self.function("Error_GetCode")(ctypes.byref(code_args))
      if nested:
        self._destroy_error(nested)
        code = support.StatusCode.UNKNOWN
      else:
        code = code_args.code
      message_args = abi.make_args(abi.PJRT_Error_Message_Args, error=error)
      self.function("Error_Message")(ctypes.byref(message_args))
      message = read_string(message_args.message, message_args.message_size)
    finally:
      self._destroy_error(error)
    try:
      code = support.StatusCode(code)
    except ValueError:
      message = f"{message} (unknown PJRT error code {code})"
      code = support.StatusCode.UNKNOWN
    if code == support.StatusCode.OK:
      message = f"{message} (plugin returned an error with code OK)"
      code = support.StatusCode.UNKNOWN
    return support.error_for_code(code, message)

  def _destroy_error(self, error: int) -> None:
    args = abi.make_args(abi.PJRT_Error_Destroy_Args, error=error)
    self.function("Error_Destroy")(ctypes.byref(args))

  # -- Plugin-level functions. ---------------------------------------------

  def initialize(self) -> None:
    """Calls PJRT_Plugin_Initialize once (later calls do nothing)."""
    with self._lock:
      if self._initialized:
        return
      if self.has("Plugin_Initialize"):
        self.call("Plugin_Initialize")
      self._initialized = True
    self._check_attributes()

  def attributes(self) -> dict[str, Any]:
    """The plugin attributes (PJRT_Plugin_Attributes) as a dict."""
    if self._attributes is None:
      if not self.has("Plugin_Attributes"):
        self._attributes = {}
      else:
        args = self.call("Plugin_Attributes")
        try:
          self._attributes = decode_named_values(args.attributes,
                                                 args.num_attributes)
        except support.InvalidArgumentError as e:
          raise support.FailedPreconditionError(
              f"{self._describe()}: bad plugin attributes: {e}") from e
    return dict(self._attributes)

  def _check_attributes(self) -> None:
    """Checks the attributes frameworks read, where the plugin has them."""
    attributes = self.attributes()
    problems = []
    for name in _INT64_ATTRIBUTES:
      if name in attributes and (not isinstance(attributes[name], int) or
                                 isinstance(attributes[name], bool)):
        problems.append(f"{name} must be an int64, got {attributes[name]!r}")
    for name in _VERSION_ATTRIBUTES:
      value = attributes.get(name)
      if value is not None and not (isinstance(value, list) and
                                    len(value) == 3 and
                                    all(v >= 0 for v in value)):
        problems.append(
            f"{name} must be 3 non-negative int64s, got {value!r}")
    current = attributes.get("stablehlo_current_version")
    minimum = attributes.get("stablehlo_minimum_version")
    if not problems and current and minimum and minimum > current:
      problems.append(f"stablehlo_minimum_version {minimum} is newer than "
                      f"stablehlo_current_version {current}")
    if problems:
      raise support.FailedPreconditionError(
          f"{self._describe()}: bad plugin attributes: " + "; ".join(problems))

  @property
  def stablehlo_current_version(self) -> tuple[int, ...] | None:
    value = self.attributes().get("stablehlo_current_version")
    return tuple(value) if value is not None else None

  @property
  def stablehlo_minimum_version(self) -> tuple[int, ...] | None:
    value = self.attributes().get("stablehlo_minimum_version")
    return tuple(value) if value is not None else None

  @property
  def xla_version(self) -> int | None:
    return self.attributes().get("xla_version")


# --------------------------------------------------------------------------
# Loading.

# realpath of a shared library -> its Plugin: a library is loaded and
# initialized once per process, whatever names it is registered under.
_loaded_libraries: dict[str, Plugin] = {}
_load_lock = threading.RLock()


def _name_from_path(path: str) -> str:
  base = os.path.basename(path)
  for ext in (".so", ".dylib", ".dll"):
    if ext in base:
      base = base[:base.index(ext)]
      break
  if base.startswith("lib") and len(base) > 3:
    base = base[3:]
  return base


def _load_library(path: str, name: str | None) -> Plugin:
  path = os.fspath(path)
  real = os.path.realpath(path)
  with _load_lock:
    plugin = _loaded_libraries.get(real)
    if plugin is not None:
      return plugin
    if not os.path.exists(real):
      raise support.NotFoundError(f"PJRT plugin library {path} does not exist")
    try:
      library = ctypes.CDLL(real)
    except OSError as e:
      raise support.InvalidArgumentError(
          f"cannot load PJRT plugin library {path}: {e}") from e
    try:
      get_api = library.GetPjrtApi
    except AttributeError:
      raise support.InvalidArgumentError(
          f"{path} is not a PJRT plugin: it does not export GetPjrtApi"
      ) from None
    get_api.restype = ctypes.c_void_p
    get_api.argtypes = []
    plugin = Plugin(get_api() or 0, name=name or _name_from_path(path),
                    path=path, owner=library)
    plugin.initialize()
    _loaded_libraries[real] = plugin
    return plugin


def _capsule_pointer(capsule: Any) -> int:
  get_name = ctypes.pythonapi.PyCapsule_GetName
  get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
  get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
  get_pointer.restype = ctypes.c_void_p
  get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
  name = get_name(capsule)
  if name != CAPSULE_NAME:
    raise support.InvalidArgumentError(
        f"PyCapsule is named {name!r}, expected {CAPSULE_NAME!r}")
  return get_pointer(capsule, name) or 0


def load_plugin(source: Any, name: str | None = None, *,
                _depth: int = 0) -> Plugin:
  """Loads (once) and initializes a plugin from `source`.

  Args:
    source: a path to a shared library exporting GetPjrtApi; a Plugin; a
      `PJRT_Api` ctypes struct or pointer to one; a PyCapsule named
      "pjrt_c_api"; an int address; an object with `get_library_path()`; or
      a zero-argument function returning one of these.
    name: the plugin's name (default: from the file name, or "plugin").

  Raises:
    support.NotFoundError: the library does not exist.
    support.InvalidArgumentError: `source` is not a plugin.
    support.FailedPreconditionError: the plugin's API version or attributes
      are incompatible.
  """
  if isinstance(source, Plugin):
    source.initialize()
    return source
  if isinstance(source, (str, os.PathLike)):
    return _load_library(os.fspath(source), name)
  default_name = name or "plugin"
  if isinstance(source, abi.PJRT_Api):
    plugin = Plugin(ctypes.addressof(source), name=default_name, owner=source)
  # ctypes exports no public base class of its pointer types.
  elif isinstance(source, ctypes._Pointer):  # pylint: disable=protected-access
    address = ctypes.cast(source, ctypes.c_void_p).value or 0
    plugin = Plugin(address, name=default_name, owner=source)
  elif isinstance(source, ctypes.c_void_p):
    plugin = Plugin(source.value or 0, name=default_name, owner=source)
  elif isinstance(source, int) and not isinstance(source, bool):
    plugin = Plugin(source, name=default_name)
  elif type(source).__name__ == "PyCapsule":
    plugin = Plugin(_capsule_pointer(source), name=default_name, owner=source)
  elif hasattr(source, "get_library_path"):
    return _load_library(source.get_library_path(), name)
  elif callable(source) and not isinstance(source, type):
    if _depth >= 3:
      raise support.InvalidArgumentError(
          f"plugin factory {source!r} keeps returning callables")
    return load_plugin(source(), name, _depth=_depth + 1)
  else:
    raise support.InvalidArgumentError(
        f"cannot make a PJRT plugin from a {type(source).__name__}: pass a "
        "library path, a PJRT_Api, a 'pjrt_c_api' PyCapsule or an address")
  plugin.initialize()
  return plugin


# --------------------------------------------------------------------------
# Registry.


@dataclasses.dataclass
class _Entry:
  source: Any
  origin: str  # "register", "env" or "entry_point".
  plugin: Plugin | None = None


_registry: dict[str, _Entry] = {}
_registry_lock = threading.RLock()
_discovered = False


def register_plugin(name: str, path_or_object: Any, *,
                    replace: bool = False) -> None:
  """Registers a plugin under `name`; it is loaded on first `get_plugin`.

  Args:
    name: the plugin's name (e.g. "cpu").
    path_or_object: anything `load_plugin` accepts.
    replace: allow replacing a plugin already registered under `name`.

  Raises:
    support.AlreadyExistsError: `name` is taken and `replace` is False.
    support.NotFoundError: a library path that does not exist.
  """
  _register(name, path_or_object, "register", replace=replace)


def _register(name: str, source: Any, origin: str, *, replace: bool) -> None:
  if not name:
    raise support.InvalidArgumentError("a plugin name must not be empty")
  if (isinstance(source, (str, os.PathLike)) and
      not os.path.exists(os.fspath(source))):
    raise support.NotFoundError(
        f"PJRT plugin {name!r}: library {os.fspath(source)} does not exist")
  with _registry_lock:
    old = _registry.get(name)
    if old is not None and not replace:
      if old.source is source or old.source == source:
        return
      raise support.AlreadyExistsError(
          f"a PJRT plugin named {name!r} is already registered "
          f"(from {old.origin}: {old.source!r})")
    _registry[name] = _Entry(source, origin)


def unregister_plugin(name: str) -> None:
  """Removes `name` from the registry (a loaded library stays loaded)."""
  with _registry_lock:
    _registry.pop(name, None)


def get_plugin(name: str) -> Plugin:
  """The plugin registered (or discovered) under `name`, loaded.

  Raises:
    support.NotFoundError: no plugin of that name.
    (and the errors of `load_plugin`)
  """
  with _registry_lock:
    if name not in _registry and not _discovered:
      discover_plugins()
    entry = _registry.get(name)
    if entry is None:
      known = ", ".join(sorted(_registry)) or "none"
      raise support.NotFoundError(
          f"no PJRT plugin named {name!r} (registered: {known})")
    if entry.plugin is None:
      entry.plugin = load_plugin(entry.source, name)
    return entry.plugin


def registered_plugins() -> dict[str, Any]:
  """{name: source} of every registered or discovered plugin."""
  with _registry_lock:
    if not _discovered:
      discover_plugins()
    return {name: entry.source for name, entry in _registry.items()}


def parse_library_path_env(value: str) -> list[tuple[str, str]]:
  """Parses `PJRT_PLUGIN_LIBRARY_PATH`: "name:path,..." or bare paths."""
  result = []
  for item in value.split(","):
    item = item.strip()
    if not item:
      continue
    name, sep, path = item.partition(":")
    # "name:path" unless the whole item is itself an existing file (a path
    # may contain ':'); plugin names may contain dots ("my.plugin:/x.so").
    if (sep and name and path and os.sep not in name and "/" not in name and
        not os.path.exists(item)):
      result.append((name, path))
    else:
      result.append((_name_from_path(item), item))
  return result


def discover_plugins() -> list[str]:
  """Registers plugins from entry points and the environment.

  Plugins registered explicitly are kept; the environment variable overrides
  entry points. A broken entry point is skipped, not fatal (its error is
  raised later, by `get_plugin` of that name).

  Returns:
    The names discovered by this call.
  """
  global _discovered
  found = []
  with _registry_lock:
    _discovered = True
    for entry_point in importlib.metadata.entry_points(
        group=ENTRY_POINT_GROUP):
      existing = _registry.get(entry_point.name)
      if existing is not None and existing.origin != "entry_point":
        continue
      _registry[entry_point.name] = _Entry(_EntryPointSource(entry_point),
                                           "entry_point")
      found.append(entry_point.name)
    for name, path in parse_library_path_env(
        os.environ.get(LIBRARY_PATH_ENV, "")):
      existing = _registry.get(name)
      if existing is not None and existing.origin == "register":
        continue
      _registry[name] = _Entry(path, "env")
      found.append(name)
  return found


class _EntryPointSource:
  """A not-yet-imported entry point; loading imports it."""

  def __init__(self, entry_point: importlib.metadata.EntryPoint):
    self.entry_point = entry_point

  def __call__(self) -> Any:
    value = self.entry_point.load()
    if isinstance(value, types.ModuleType) and not hasattr(
        value, "get_library_path"):
      raise support.InvalidArgumentError(
          f"entry point {self.entry_point.value!r} of group "
          f"{ENTRY_POINT_GROUP!r} is a module without get_library_path()")
    return value

  def __repr__(self) -> str:
    return f"<entry point {self.entry_point.name} = {self.entry_point.value}>"


def _reset_registry_for_tests() -> None:
  """Forgets registrations and discovery (loaded libraries stay loaded)."""
  global _discovered
  with _registry_lock:
    _registry.clear()
    _discovered = False
