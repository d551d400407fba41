"""Tests for support._src.env."""

import pytest

from support._src import env


def test_source_root_holds_this_package():
  assert (env.source_root() / "support" / "_src" / "env.py").is_file()


def test_env_var_overrides_discovery(tmp_path, monkeypatch):
  (tmp_path / "stablehlo" / "interpret").mkdir(parents=True)
  monkeypatch.setenv(env.CONFORMANCE_ENV, str(tmp_path))
  assert env.conformance_dir() == tmp_path
  assert env.stablehlo_corpus("interpret") == tmp_path / "stablehlo" / "interpret"
  assert env.stablehlo_corpus("vhlo") is None


def test_env_var_pointing_nowhere_means_absent(tmp_path, monkeypatch):
  monkeypatch.setenv(env.CONFORMANCE_ENV, str(tmp_path / "missing"))
  assert env.conformance_dir() is None
  assert env.stablehlo_corpus("interpret") is None
  reason = env.missing_corpus_reason("interpret")
  assert env.CONFORMANCE_ENV in reason and "interpret" in reason


def test_discovery_finds_shared_beside_checkout(monkeypatch):
  monkeypatch.delenv(env.CONFORMANCE_ENV, raising=False)
  found = env.conformance_dir()
  expected = env.source_root().parent / "shared" / "conformance"
  if not (expected / "stablehlo").is_dir():
    pytest.skip("no ../shared/conformance beside this checkout")
  assert found == expected
