"""Differential test: jaxlib's MLIR parser accepts what our printer writes,
for a fixed sample of the corpora (every case jaxlib itself can parse)."""

import pytest

from stablehlo._src.testing import jaxlib_oracle
from stablehlo.tools import jaxlib_compare
from support._src import env

pytestmark = pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                                reason=str(jaxlib_oracle.skip_reason()))


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
