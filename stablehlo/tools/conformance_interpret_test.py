"""CI gate for the interpreter against the upstream corpora.

* `interpret/`: every case, with the checked-in expected-failure list: a new
  failure or a listed case that now passes fails the test.
* `testdata/`: a fixed sample (every 10th enabled file); the full corpus is
  run by `python -m stablehlo.tools.conformance --suite testdata --mode
  interpret` (see the README for the figures).
"""

import pathlib

import pytest

from stablehlo.tools import conformance
from support import env

_XFAIL = pathlib.Path(__file__).parent / "testdata" / "interpret_xfail.txt"


def _run(capsys, argv):
  rc = conformance.main(argv)
  out = capsys.readouterr().out
  return rc, out


@pytest.mark.skipif(env.stablehlo_corpus("interpret") is None,
                    reason=env.missing_corpus_reason("interpret"))
def test_interpret_suite_matches_expected_failures(capsys):
  rc, out = _run(capsys, ["--suite", "interpret", "--mode", "interpret",
                          "--xfail", str(_XFAIL), "--jobs", "2"])
  last = out.splitlines()[-1]
  assert rc == 0, out[-4000:]
  passed = int(last.split()[0])
  assert passed + len(conformance.read_xfail(str(_XFAIL))) == 524, last


@pytest.mark.skipif(env.stablehlo_corpus("testdata") is None,
                    reason=env.missing_corpus_reason("testdata"))
def test_testdata_sample_passes(capsys):
  rc, out = _run(capsys, ["--suite", "testdata", "--mode", "interpret",
                          "--sample", "10", "--jobs", "2"])
  assert rc == 0, out[-4000:]
  assert " 0 failed" in out.splitlines()[-1]
