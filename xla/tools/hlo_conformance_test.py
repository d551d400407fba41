"""Tests of the hlo_conformance tool."""

import pytest

from support._src import env
from xla.tools import hlo_conformance


def test_sampled_run_prints_counts(capsys):
  if env.stablehlo_corpus("testdata") is None:
    pytest.skip(env.missing_corpus_reason("testdata"))
  files = [str(p) for p in hlo_conformance.suite_files("testdata")
           if "add_float32_20_20_float32_20_20" in p.name]
  assert files
  rc = hlo_conformance.main(["--suite", "testdata"] + files)
  out = capsys.readouterr().out.strip().splitlines()
  assert out[-1] == f"{len(files)} passed, 0 failed"
  assert rc == 0
