"""~1,000 deterministic mutations: malformed input only raises ParseError."""

from stablehlo._src.text import fuzz


def test_mutations_only_raise_parse_error():
  failures = fuzz.run(cases=1000, seed=1234)
  assert not failures, "\n\n".join(failures[:3])
