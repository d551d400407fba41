"""Differential test: jaxlib's MLIR parser accepts what our printer writes,
for a fixed sample of the corpora (every case jaxlib itself can parse)."""

import pytest

from stablehlo._src.testing import jaxlib_oracle
from stablehlo.tools import jaxlib_compare
from support import env

pytestmark = pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                                reason=str(jaxlib_oracle.skip_reason()))


# The least fraction of cases whose printed text must equal jaxlib's (on the
# whole corpora: testdata 2709/2713, interpret 7/7, vhlo 104/105; the rest
# are splats of empty complex tensors and one invalid custom_call).
MIN_IDENTICAL = {"testdata": 0.97, "interpret": 1.0, "vhlo": 0.9}


@pytest.mark.parametrize("suite,sample", [("testdata", 40), ("interpret", 1),
                                          ("vhlo", 4)])
def test_jaxlib_accepts_our_print(suite, sample):
  if env.stablehlo_corpus(suite) is None:
    pytest.skip(env.missing_corpus_reason(suite))
  res = jaxlib_compare.compare(suite, sample, progress=False)
  assert res.jaxlib_parsed > 0
  assert not res.ours_errors, res.ours_errors[:3]
  assert not res.rejected, res.rejected[:3]
  assert res.accepted == res.jaxlib_parsed
  print(f"{suite}: identical text {res.identical}/{res.accepted}")
  assert res.identical >= MIN_IDENTICAL[suite] * res.accepted, res.first_diffs


def test_interpret_cases_without_checks_print_like_jaxlib():
  if env.stablehlo_corpus("interpret") is None:
    pytest.skip(env.missing_corpus_reason("interpret"))
  res = jaxlib_compare.compare("interpret", 8, progress=False,
                               strip_checks=True)
  assert res.jaxlib_parsed > 30
  assert not res.ours_errors and not res.rejected
  # 473/473 on the whole suite.
  assert res.identical >= 0.97 * res.accepted, res.first_diffs
