"""cache_bench runs a cold compile and a persistent-cache hit in child
processes and prints both (timings are printed, never asserted)."""

import pytest

from pjrt._src.plugin import backends
from pjrt.tools import cache_bench

pytest.importorskip("jax")


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="the cpu backend is not available")
def test_prints_a_cold_and_a_hit_figure(capsys):
  assert cache_bench.main(["--programs", "softmax", "--platforms",
                           "openxla_cpu", "--repeats", "1"]) == 0
  lines = capsys.readouterr().out.strip().splitlines()
  assert lines[0] == "program | openxla_cpu cold ms | openxla_cpu hit ms"
  name, cold, hit = [c.strip() for c in lines[1].split("|")]
  assert name == "softmax" and float(cold) > 0 and float(hit) > 0


def test_an_unknown_program_is_refused():
  with pytest.raises(SystemExit):
    cache_bench.main(["--programs", "nope"])
