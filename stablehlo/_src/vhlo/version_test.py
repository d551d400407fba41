"""Tests for the StableHLO version API."""

import pytest

import support
from stablehlo._src.vhlo import version as v


def test_parse_and_compare():
  assert v.Version.parse("1.10.0") > v.Version.parse("1.9.3")
  assert v.Version.parse("0.20.0") < v.Version.parse("1.0.0")
  assert v.Version.parse("1.2.3") == v.Version(1, 2, 3)
  assert str(v.Version.parse("01.2.3")) == "1.2.3"
  assert v.Version.parse("1.4.1").without_patch() == v.Version(1, 4, 0)
  assert len({v.Version(1, 2, 3), v.Version.parse("1.2.3")}) == 1


@pytest.mark.parametrize("text", ["", "1.2", "1.2.3.4", "x.y.z", "1.-2.3",
                                  " 1.2.3", "1.2.3 "])
def test_parse_rejects_malformed(text):
  with pytest.raises(support.InvalidArgumentError):
    v.Version.parse(text)


def test_parse_rejects_non_strings():
  with pytest.raises(support.InvalidArgumentError):
    v.Version.parse(120)


def test_current_and_minimum():
  assert v.get_current_version() == "1.20.0"
  assert v.get_minimum_version() == "0.9.0"


def test_smaller_version():
  assert v.get_smaller_version("1.2.3", "1.10.0") == "1.2.3"
  assert v.get_smaller_version("1.10.0", "1.2.3") == "1.2.3"
  assert v.get_smaller_version("0.9.0", "0.9.0") == "0.9.0"
  with pytest.raises(support.InvalidArgumentError):
    v.get_smaller_version("1.2", "1.3.0")


def test_compatibility_requirements():
  req = v.CompatibilityRequirement
  assert [r.value for r in req] == [0, 1, 2, 3]
  assert v.get_version_from_compatibility_requirement(req.NONE) == "1.20.0"
  assert v.get_version_from_compatibility_requirement(req.WEEK_4) == "1.18.0"
  assert v.get_version_from_compatibility_requirement(req.WEEK_12) == "1.16.2"
  assert v.get_version_from_compatibility_requirement(req.MAX) == "0.9.0"
  assert v.get_version_from_compatibility_requirement(3) == "0.9.0"
  with pytest.raises(support.InvalidArgumentError):
    v.get_version_from_compatibility_requirement(7)


@pytest.mark.parametrize("target,expected", [
    ("0.9.0", 0), ("0.9.9", 0), ("0.10.0", 1), ("0.11.3", 1), ("0.12.0", 3),
    ("0.13.0", 3), ("0.14.0", 4), ("0.14.9", 4), ("0.15.0", 6),
    ("1.0.0", 6), ("1.20.0", 6)])
def test_bytecode_version_by_target(target, expected):
  assert v.bytecode_version(target) == expected


@pytest.mark.parametrize("target", ["0.8.0", "1.21.0", "2.0.0"])
def test_bytecode_version_outside_window(target):
  with pytest.raises(support.InvalidArgumentError):
    v.bytecode_version(target)


def test_resolve_target_messages():
  assert v.resolve_target("current") == v.CURRENT
  assert v.resolve_target("minimum") == v.MINIMUM
  assert v.resolve_target("1.4.1") == v.Version(1, 4, 1)
  cases = {"": "No target version specified",
           "x.y.z": "Invalid target version argument 'x.y.z'",
           "100.10.10": "greater than current version 1.20.0",
           "0.0.0": "less than minimum supported 0.9.0",
           "1.20.1": "greater than current version"}
  for target, message in cases.items():
    with pytest.raises(support.InvalidArgumentError, match=message):
      v.resolve_target(target)


def test_portable_artifact_version_from_header():
  # Magic, bytecode version 6 as a varint ((6 << 1) | 1), producer, NUL.
  data = b"ML\xefR\x0dStableHLO_v1.15.0\x00rest"
  assert v.get_portable_artifact_version(data) == "1.15.0"
  for bad in (b"", b"MLIR\x0dStableHLO_v1.0.0\x00",
              b"ML\xefR\x0dMLIR20.0.0\x00", b"ML\xefR\x0dStableHLO_v1.0.0"):
    with pytest.raises(support.InvalidArgumentError):
      v.get_portable_artifact_version(bad)
