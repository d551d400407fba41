"""Parses and round-trips a fixed sample (every 10th file) of each corpus."""

import pytest

from stablehlo.tools import conformance
from support import env

SAMPLE_EVERY = 10


@pytest.mark.parametrize("suite", conformance.SUITES)
def test_corpus_sample_round_trips(suite):
  if env.stablehlo_corpus(suite) is None:
    pytest.skip(env.missing_corpus_reason(suite))
  files = conformance.suite_files(suite)[::SAMPLE_EVERY]
  assert files
  failures = []
  for path in files:
    _, _, failed, errors = conformance.run_file((suite, "roundtrip",
                                                 str(path)))
    if failed:
      failures.extend(errors)
  assert not failures, "\n".join(failures[:5])
