"""A fixed-seed sample of the deserializer fuzzer (see fuzz.py)."""

import random

import pytest

import support
from stablehlo._src.vhlo import fuzz
from stablehlo._src.vhlo import portable


def _small_seeds():
  # Small seeds keep ~1000 cases within seconds; the script covers all.
  return fuzz.seeds(max_size=4096)


def test_every_case_is_ok_or_a_support_error():
  report = fuzz.fuzz(1000, seed=1234, seed_files=_small_seeds(),
                     time_limit=5.0)
  assert report.cases == 1000
  assert not report.failures, report.failures[:5]
  # The mutations must actually reach the error paths.
  assert report.rejected > 300


def test_large_corpus_seeds_sample():
  big = [s for s in fuzz.seeds() if len(s[1]) > 4096]
  if not big:
    pytest.skip("no large corpus artifacts (corpus absent)")
  report = fuzz.fuzz(60, seed=7, seed_files=big[:3], time_limit=5.0)
  assert not report.failures, report.failures[:5]


def test_mutations_are_deterministic():
  seeds = _small_seeds()
  a = [fuzz.mutate(seeds[0][1], random.Random(5)) for _ in range(3)]
  b = [fuzz.mutate(seeds[0][1], random.Random(5)) for _ in range(3)]
  assert a == b


def test_duplicated_section_is_rejected():
  name = "program1@1.0.0"
  data = dict(_small_seeds())[name]
  spans = fuzz._sections(data)  # pylint: disable=protected-access
  assert spans, name
  s, e = spans[0]
  with pytest.raises(support.DataLossError, match="duplicate section"):
    portable.deserialize_portable_artifact(data[:e] + data[s:e] + data[e:])


def test_run_case_classifies():
  assert fuzz.run_case(b"junk", 1.0)[0] == "rejected"
  data = dict(_small_seeds())["program0@current"]
  assert fuzz.run_case(data, 1.0)[0] == "ok"
