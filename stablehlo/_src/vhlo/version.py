"""StableHLO versions: parsing, ordering and the compatibility API.

A portable artifact targets a StableHLO version `X.Y.Z`. This module knows
the window this implementation serves (`MINIMUM` .. `CURRENT`), maps
compatibility requirements to target versions and picks the MLIR bytecode
format version a target implies. The numbers are the facts StableHLO
publishes in `stablehlo/dialect/Version.{h,cpp}`; the API names follow the
StableHLO Python bindings (`get_current_version`, `get_minimum_version`,
`get_smaller_version`, `get_version_from_compatibility_requirement`).
"""

from __future__ import annotations

import enum
import functools
import re

import support

_VERSION_RE = re.compile(r"^([0-9]+)\.([0-9]+)\.([0-9]+)$")


@functools.total_ordering
class Version:
  """A `major.minor.patch` version; compares lexicographically."""

  __slots__ = ("major", "minor", "patch")

  def __init__(self, major: int, minor: int, patch: int):
    for part in (major, minor, patch):
      if not isinstance(part, int) or isinstance(part, bool) or part < 0:
        raise support.InvalidArgumentError(
            f"version parts must be non-negative integers, got "
            f"{(major, minor, patch)!r}")
    self.major, self.minor, self.patch = major, minor, patch

  @classmethod
  def parse(cls, text) -> "Version":
    """Parses `X.Y.Z` (decimal numbers only, as upstream's regex)."""
    if isinstance(text, Version):
      return text
    if not isinstance(text, str):
      raise support.InvalidArgumentError(
          f"expected a version string 'X.Y.Z', got {type(text).__name__}")
    m = _VERSION_RE.match(text)
    if m is None:
      raise support.InvalidArgumentError(
          f"invalid StableHLO version {text!r}: expected the form 'X.Y.Z'")
    return cls(*(int(g) for g in m.groups()))

  @property
  def parts(self) -> tuple:
    return (self.major, self.minor, self.patch)

  def without_patch(self) -> "Version":
    if self.patch == 0:  # versions are immutable
      return self
    return Version(self.major, self.minor, 0)

  def __eq__(self, other):
    if not isinstance(other, Version):
      return NotImplemented
    return self.parts == other.parts

  def __lt__(self, other):
    if not isinstance(other, Version):
      return NotImplemented
    return self.parts < other.parts

  def __hash__(self):
    return hash(self.parts)

  def __str__(self):
    return f"{self.major}.{self.minor}.{self.patch}"

  def __repr__(self):
    return f"Version({self})"


# The version of the VHLO op set this implementation reads and writes, and
# the oldest one it still targets (StableHLO promises 5 years backward and 2
# years forward compatibility around these).
CURRENT = Version(1, 20, 0)
MINIMUM = Version(0, 9, 0)


class CompatibilityRequirement(enum.IntEnum):
  """How old a consumer the artifact must still load on.

  The values match StableHLO's `StablehloCompatibilityRequirement`.
  """

  NONE = 0  # No requirement: the current version.
  WEEK_4 = 1  # At least 4 weeks old.
  WEEK_12 = 2  # At least 12 weeks old.
  MAX = 3  # The minimum supported version.


# Anchors published with StableHLO 1.20.0 (`fromCompatibilityRequirement`);
# each is a release at least that old.
_REQUIREMENT_VERSIONS = {
    CompatibilityRequirement.WEEK_4: Version(1, 18, 0),
    CompatibilityRequirement.WEEK_12: Version(1, 16, 2),
}


def get_current_version() -> str:
  return str(CURRENT)


def get_minimum_version() -> str:
  return str(MINIMUM)


def get_smaller_version(version1: str, version2: str) -> str:
  """The smaller of two `X.Y.Z` versions (as a string)."""
  v1, v2 = Version.parse(version1), Version.parse(version2)
  return str(v1 if v1 < v2 else v2)


def get_version_from_compatibility_requirement(requirement) -> str:
  """The target version that satisfies `requirement`."""
  try:
    requirement = CompatibilityRequirement(requirement)
  except ValueError as e:
    raise support.InvalidArgumentError(
        f"unknown compatibility requirement {requirement!r}") from e
  if requirement == CompatibilityRequirement.NONE:
    return str(CURRENT)
  if requirement == CompatibilityRequirement.MAX:
    return str(MINIMUM)
  return str(_REQUIREMENT_VERSIONS[requirement])


def resolve_target(target) -> Version:
  """Validates a serialization target: `X.Y.Z`, "current" or "minimum".

  Raises InvalidArgumentError outside [MINIMUM, CURRENT] (patch ignored for
  the upper bound check only as upstream does: 1.20.1 is still too new).
  """
  if isinstance(target, str) and target in ("current", "minimum"):
    return CURRENT if target == "current" else MINIMUM
  if isinstance(target, str) and not _VERSION_RE.match(target):
    if not target:
      raise support.InvalidArgumentError(
          "No target version specified. Target version must be of the form "
          "`#.#.#`.")
    raise support.InvalidArgumentError(
        f"Invalid target version argument '{target}'. Target version must "
        "be of the form `#.#.#`.")
  version = Version.parse(target)
  if version < MINIMUM:
    raise support.InvalidArgumentError(
        f"target version {version} is less than minimum supported {MINIMUM}")
  if CURRENT < version:
    raise support.InvalidArgumentError(
        f"target version {version} is greater than current version {CURRENT}")
  return version


# MLIR bytecode format version by target (upper bounds, exclusive).
_BYTECODE_VERSIONS = ((Version(0, 10, 0), 0), (Version(0, 12, 0), 1),
                      (Version(0, 14, 0), 3), (Version(0, 15, 0), 4))


def bytecode_version(target) -> int:
  """The MLIR bytecode format version an artifact for `target` uses."""
  version = Version.parse(target)
  if version < MINIMUM or CURRENT < version:
    raise support.InvalidArgumentError(
        f"version {version} is outside the supported window "
        f"[{MINIMUM}, {CURRENT}]")
  for bound, bc_version in _BYTECODE_VERSIONS:
    if version < bound:
      return bc_version
  return 6


def get_portable_artifact_version(data: bytes) -> str:
  """The StableHLO version recorded in an artifact's producer string.

  The producer is `StableHLO_vX.Y.Z`, NUL-terminated, right after the magic
  number and the bytecode version.
  """
  data = bytes(data)
  if data[:4] != b"ML\xefR":
    raise support.InvalidArgumentError(
        "not a portable artifact: missing the MLIR bytecode magic number")
  end = data.find(b"\0", 4)
  if end < 0:
    raise support.InvalidArgumentError(
        "not a portable artifact: unterminated producer string")
  header = data[4:end]
  at = header.find(b"StableHLO_v")
  if at < 0:
    raise support.InvalidArgumentError(
        "not a StableHLO portable artifact: no 'StableHLO_v' producer")
  text = header[at + len(b"StableHLO_v"):].decode("ascii", "replace")
  return str(Version.parse(text))
