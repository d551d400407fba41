"""Flags as module-level objects, overridable through `$OPENXLA_FLAGS`.

Like XLA's `XLA_FLAGS`, any module defines its flags at import time:

  _DUMP_TO = flags.define_string("xla_dump_to", "", "Dump HLO here.")
  ...
  if _DUMP_TO.value: ...

and a user sets them without touching code:

  OPENXLA_FLAGS="--xla_dump_to=/tmp/x --v=2 --noxla_cpu_fast_math" python ...

Accepted forms are `--name=value`, and for bool flags `--name` and `--noname`.
`--undefok=a,b` (as in absl) lets the named flags be absent from the registry.
The variable is parsed (with `shlex`, so values may be quoted) at the first
`.value` read of any flag and again by `reload_from_env()`. Values come, from
strongest to weakest, from `override(...)`, a tool's command line
(`parse_flags`), the environment variable, and the flag's default.

Why not absl.flags itself: absl's `FlagValues` refuses every read until
someone calls `FLAGS(argv)`, and its global `FLAGS` belongs to whoever owns
`main` (JAX, PyTorch, pytest). A library loaded inside a framework can
guarantee neither, so this registry is our own: small, lazily fed from the
environment, and separate from absl's flags.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shlex
import threading
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar

from support._src import status

ENV_VAR = "OPENXLA_FLAGS"

T = TypeVar("T")

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TRUE = frozenset({"true", "t", "1", "yes", "y"})
_FALSE = frozenset({"false", "f", "0", "no", "n"})
_UNSET = object()


def _error(flag_name: str, source: str, message: str):
  return status.InvalidArgumentError(
      f"flag --{flag_name} (from {source}): {message}")


# Value converters: each takes a raw value (a string from the environment or
# command line, or a Python value from a default or an override) and returns
# the typed value, or raises ValueError with a short reason.


def _to_bool(raw: Any, unused_choices) -> bool:
  if isinstance(raw, bool):
    return raw
  if isinstance(raw, str):
    lowered = raw.strip().lower()
    if lowered in _TRUE:
      return True
    if lowered in _FALSE:
      return False
  raise ValueError(f"expected a bool (true/false/1/0), got {raw!r}")


def _to_int(raw: Any, unused_choices) -> int:
  if isinstance(raw, int) and not isinstance(raw, bool):
    return raw
  if isinstance(raw, str):
    try:
      return int(raw.strip(), 0)  # Accepts 0x.., 0o.., 1_000.
    except ValueError:
      try:
        return int(raw.strip())  # Accepts leading zeros ("010").
      except ValueError:
        pass
  raise ValueError(f"expected an int, got {raw!r}")


def _to_float(raw: Any, unused_choices) -> float:
  if isinstance(raw, (int, float)) and not isinstance(raw, bool):
    return float(raw)
  if isinstance(raw, str):
    try:
      return float(raw.strip())
    except ValueError:
      pass
  raise ValueError(f"expected a float, got {raw!r}")


def _to_string(raw: Any, unused_choices) -> str:
  if isinstance(raw, str):
    return raw
  raise ValueError(f"expected a string, got {raw!r}")


def _to_enum(raw: Any, choices: tuple[str, ...]) -> str:
  if isinstance(raw, str) and raw in choices:
    return raw
  raise ValueError(
      f"expected one of {', '.join(choices)}; got {raw!r}")


def _to_list(raw: Any, unused_choices) -> tuple[str, ...]:
  if isinstance(raw, str):
    return tuple(item.strip() for item in raw.split(",") if item.strip())
  if isinstance(raw, (list, tuple)) and all(isinstance(i, str) for i in raw):
    return tuple(raw)
  raise ValueError(f"expected a comma-separated list of strings, got {raw!r}")


_CONVERTERS: dict[str, Callable[[Any, Any], Any]] = {
    "bool": _to_bool,
    "int": _to_int,
    "float": _to_float,
    "string": _to_string,
    "enum": _to_enum,
    "list": _to_list,
}


class Flag(Generic[T]):
  """One flag. Read it with `.value`; never assign to it.

  Attributes:
    name: the flag's name, without dashes.
    default: the typed default value.
    help: one-line description shown by `describe_flags()`.
    kind: "bool", "int", "float", "string", "enum" or "list".
    choices: the allowed values of an enum flag (else empty).
  """

  def __init__(self, registry: "FlagRegistry", name: str, default: Any,
               help: str, kind: str, choices: tuple[str, ...] = (),
               validator: Callable[[Any], None] | None = None):
    self._registry = registry
    self.name = name
    self.help = help
    self.kind = kind
    self.choices = choices
    self._validator = validator
    self.default: T = self.convert(default, "default")
    self._env: Any = _UNSET
    self._cli: Any = _UNSET
    self._overrides: list[Any] = []

  def convert(self, raw: Any, source: str) -> T:
    """Returns `raw` as this flag's type, or raises InvalidArgumentError."""
    try:
      value = _CONVERTERS[self.kind](raw, self.choices)
      if self._validator is not None:
        self._validator(value)
    except (ValueError, TypeError) as e:
      raise _error(self.name, source, str(e)) from None
    return value

  @property
  def value(self) -> T:
    """The current value: override > command line > environment > default."""
    if self._overrides:
      return self._overrides[-1]
    self._registry.ensure_environment_loaded()
    if self._cli is not _UNSET:
      return self._cli
    if self._env is not _UNSET:
      return self._env
    return self.default

  # -- Sources, set by the registry -------------------------------------------

  def set_environment_value(self, value: Any) -> None:
    """Sets the (already converted) value from the environment variable."""
    self._env = value

  def clear_environment_value(self) -> None:
    """Forgets the environment's value: the variable does not set this flag."""
    self._env = _UNSET

  def set_command_line_value(self, value: Any) -> None:
    """Sets the (already converted) value from a tool's command line."""
    self._cli = value

  def push_override(self, value: Any) -> None:
    """Makes the (already converted) `value` win until `pop_override()`."""
    self._overrides.append(value)

  def pop_override(self) -> None:
    """Removes the innermost `push_override()` value."""
    self._overrides.pop()

  def __repr__(self) -> str:
    return f"Flag(--{self.name}, {self.kind}, default={self.default!r})"


class FlagRegistry:
  """A set of flags and the environment variable that overrides them.

  The module-level functions of this file use one process-wide registry;
  tests may build their own.
  """

  def __init__(self, env_var: str = ENV_VAR):
    self.env_var = env_var
    self._flags: dict[str, Flag] = {}
    self._lock = threading.RLock()
    self._env_loaded = False
    self._env_raw: dict[str, str | None] = {}

  # -- Definition --------------------------------------------------------------

  def _define(self, name: str, default: Any, help: str, kind: str,
              choices: tuple[str, ...] = (),
              validator: Callable[[Any], None] | None = None) -> Flag:
    if not isinstance(name, str) or not _NAME_RE.match(name):
      raise status.InvalidArgumentError(
          f"invalid flag name {name!r}: use letters, digits and underscores")
    flag = Flag(self, name, default, help, kind, choices, validator)
    with self._lock:
      if name in self._flags:
        raise status.AlreadyExistsError(
            f"flag --{name} is defined twice (it already is: "
            f"{self._flags[name]!r})")
      if self._env_loaded:
        # Defined after the environment was read (e.g. under --undefok).
        values = self._resolve(self._env_raw, {name: flag}, self.env_var,
                               allow_unknown=True)
        if name in values:
          flag.set_environment_value(values[name])
      self._flags[name] = flag
    return flag

  def define_bool(self, name: str, default: bool, help: str) -> Flag[bool]:
    return self._define(name, default, help, "bool")

  def define_int(self, name: str, default: int, help: str,
                 validator: Callable[[int], None] | None = None) -> Flag[int]:
    return self._define(name, default, help, "int", validator=validator)

  def define_float(self, name: str, default: float, help: str,
                   validator: Callable[[float], None] | None = None
                   ) -> Flag[float]:
    return self._define(name, default, help, "float", validator=validator)

  def define_string(self, name: str, default: str, help: str,
                    validator: Callable[[str], None] | None = None
                    ) -> Flag[str]:
    return self._define(name, default, help, "string", validator=validator)

  def define_enum(self, name: str, default: str, choices: Sequence[str],
                  help: str) -> Flag[str]:
    choices = tuple(choices)
    if not choices or not all(isinstance(c, str) for c in choices):
      raise status.InvalidArgumentError(
          f"flag --{name}: enum choices must be a non-empty list of strings")
    return self._define(name, default, help, "enum", choices=choices)

  def define_list(self, name: str, default: Sequence[str] | str, help: str
                  ) -> Flag[tuple[str, ...]]:
    """A comma-separated list of strings (e.g. pass names to disable)."""
    return self._define(name, default, help, "list")

  # -- Lookup ------------------------------------------------------------------

  def get(self, name: str) -> Flag:
    """The flag named `name`; NotFoundError (with close matches) if none."""
    flag = self._flags.get(name)
    if flag is None:
      raise status.NotFoundError(
          f"no flag named --{name}{self._suggest(name)}")
    return flag

  def all_flags(self) -> list[Flag]:
    """All defined flags, sorted by name."""
    with self._lock:
      return sorted(self._flags.values(), key=lambda f: f.name)

  def _suggest(self, name: str) -> str:
    candidates = list(self._flags)
    candidates += ["no" + n for n, f in self._flags.items() if f.kind == "bool"]
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    if not close:
      return ""
    return "; did you mean " + " or ".join(f"--{c}" for c in close) + "?"

  # -- Parsing -----------------------------------------------------------------

  @staticmethod
  def _split(arg: str, source: str) -> tuple[str, str | None]:
    """'--name=value' -> ('name', 'value'); '--name' -> ('name', None)."""
    if not arg.startswith("--") or len(arg) == 2:
      raise status.InvalidArgumentError(
          f"{source}: expected --name=value, --name or --noname; got {arg!r}")
    body = arg[2:]
    name, eq, raw = body.partition("=")
    if not _NAME_RE.match(name):
      raise status.InvalidArgumentError(
          f"{source}: invalid flag name in {arg!r}")
    return name, (raw if eq else None)

  def _resolve(self, raw: dict[str, str | None], flags: dict[str, Flag],
               source: str, allow_unknown: bool = False,
               undefok: set[str] = frozenset()) -> dict[str, Any]:
    """Converts `name -> raw` assignments into typed values for `flags`.

    `name` is as written (`noname` for a false bool); a raw value of None
    means the flag was given without `=value`.
    """
    values: dict[str, Any] = {}
    unknown = []
    for name, value in raw.items():
      flag = flags.get(name)
      if flag is not None:
        if value is None:
          if flag.kind != "bool":
            raise _error(name, source,
                         f"needs a value: --{name}=<{flag.kind}>")
          values[name] = True
        else:
          values[name] = flag.convert(value, source)
        continue
      base = name[2:] if name.startswith("no") else None
      flag = flags.get(base) if base else None
      if flag is not None and flag.kind == "bool":
        if value is not None:
          raise _error(base, source,
                       f"--{name} takes no value; use --{base}={value}")
        values[base] = False
        continue
      if name in undefok or (base and base in undefok):
        continue
      unknown.append(name)
    if unknown and not allow_unknown:
      details = "; ".join(f"--{n}{self._suggest(n)}" for n in unknown)
      raise status.InvalidArgumentError(
          f"{source}: unknown flag(s): {details}. (A flag is known once the "
          f"module defining it is imported; --undefok=name skips one.)")
    return values

  def _parse_env(self) -> tuple[dict[str, Any], dict[str, str | None]]:
    text = os.environ.get(self.env_var, "")
    try:
      args = shlex.split(text)
    except ValueError as e:
      raise status.InvalidArgumentError(
          f"{self.env_var}: cannot split {text!r}: {e}") from None
    raw: dict[str, str | None] = {}
    undefok: set[str] = set()
    for arg in args:
      name, value = self._split(arg, self.env_var)
      if name == "undefok":
        undefok.update(n.strip() for n in (value or "").split(",") if n.strip())
        continue
      raw.pop(name, None)  # The last assignment wins, also in dict order.
      raw[name] = value
    values = self._resolve(raw, self._flags, self.env_var, undefok=undefok)
    return values, raw

  def ensure_environment_loaded(self) -> None:
    """Parses the environment variable unless it has been parsed already."""
    if self._env_loaded:
      return
    with self._lock:
      if self._env_loaded:
        return
      self._apply_env()

  def _apply_env(self) -> None:
    values, raw = self._parse_env()  # Raises before changing any state.
    for name, flag in self._flags.items():
      if name in values:
        flag.set_environment_value(values[name])
      else:
        flag.clear_environment_value()
    self._env_raw = raw
    self._env_loaded = True

  def reload_from_env(self) -> None:
    """Parses the environment variable again (it may have changed)."""
    with self._lock:
      self._apply_env()

  def parse_flags(self, argv: Sequence[str]) -> list[str]:
    """Consumes the known `--flag[=value]` args of `argv`; returns the rest.

    Arguments that are not known flags (including argv[0], positional ones
    and unknown `--options`) are returned in order; everything from a bare
    `--` on is returned untouched. Bad values of known flags raise
    InvalidArgumentError naming the flag. Command-line values beat
    `$OPENXLA_FLAGS`.
    """
    rest: list[str] = []
    assignments: list[tuple[str, str | None]] = []
    args = list(argv)
    for i, arg in enumerate(args):
      if arg == "--":
        rest.extend(args[i:])
        break
      if arg.startswith("--") and len(arg) > 2:
        name, eq, value = arg[2:].partition("=")
        value = value if eq else None
        known = name in self._flags or (
            name.startswith("no") and
            getattr(self._flags.get(name[2:]), "kind", None) == "bool")
        if known:
          assignments.append((name, value))
          continue
      rest.append(arg)
    with self._lock:
      parsed = {}
      for name, value in assignments:  # Later assignments win.
        parsed.update(self._resolve({name: value}, self._flags,
                                    "command line"))
      for name, value in parsed.items():
        self._flags[name].set_command_line_value(value)
    return rest

  # -- Tests -------------------------------------------------------------------

  @contextlib.contextmanager
  def override(self, **values: Any) -> Iterator[None]:
    """Sets flags within a `with` block (for tests), process-wide.

    Values may be typed (`override(v=2)`) or strings as on a command line
    (`override(v="2")`). Unknown names and bad values raise
    InvalidArgumentError before anything changes.
    """
    converted = []
    for name, raw in values.items():
      flag = self._flags.get(name)
      if flag is None:
        raise status.InvalidArgumentError(
            f"override: unknown flag --{name}{self._suggest(name)}")
      converted.append((flag, flag.convert(raw, "override")))
    for flag, value in converted:
      flag.push_override(value)
    try:
      yield
    finally:
      for flag, _ in reversed(converted):
        flag.pop_override()

  # -- Help --------------------------------------------------------------------

  def describe_flags(self) -> str:
    """Help text for every flag, sorted by name."""
    lines = [f"Flags (set them with {self.env_var}=\"--name=value ...\", or on "
             "a tool's command line; bool flags also take --name / --noname):"]
    for flag in self.all_flags():
      kind = flag.kind
      if flag.choices:
        kind += " of " + "|".join(flag.choices)
      default = flag.default
      if flag.kind == "list":
        default = ",".join(default)
      lines.append(f"  --{flag.name}: {flag.help}")
      lines.append(f"      ({kind}; default: {default!r})")
    return "\n".join(lines)


# The process-wide registry and its module-level API.
_REGISTRY = FlagRegistry()

define_bool = _REGISTRY.define_bool
define_int = _REGISTRY.define_int
define_float = _REGISTRY.define_float
define_string = _REGISTRY.define_string
define_enum = _REGISTRY.define_enum
define_list = _REGISTRY.define_list
get_flag = _REGISTRY.get
all_flags = _REGISTRY.all_flags
reload_from_env = _REGISTRY.reload_from_env
parse_flags = _REGISTRY.parse_flags
override = _REGISTRY.override
describe_flags = _REGISTRY.describe_flags
