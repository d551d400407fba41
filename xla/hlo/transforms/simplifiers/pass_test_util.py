"""Test helpers for HLO passes.

`run_and_filecheck(hlo_text, pass_, expected)` (after XLA's
`RunAndFilecheckHloRewrite`) parses and verifies a module, runs the pass,
verifies the result, prints it and matches the text against `expected`, a
FileCheck check text (support.testing.filecheck: `CHECK:`, `CHECK-NEXT:`,
`CHECK-NOT:`, `{{regex}}`, `[[VAR:regex]]`, ...). With `expected=None` the
pass must report no change and leave the printed module as it was. It
returns `(changed, module)` for any further assertions.

`assert_same_results(before, after)` checks that a pass kept a module's
meaning by running the module before and after with the HLO evaluator on
the same random inputs; `run_and_filecheck(..., check_results=True)` does
that too.
"""

from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from support.testing import filecheck as _filecheck
from xla import primitive_util
from xla.hlo.evaluator.hlo_evaluator import HloEvaluator
from xla.hlo.parser import hlo_parser
from xla.service import hlo_verifier


def entry_module(body: str, name: str = "m") -> str:
  """HLO text of a module whose only computation is `ENTRY e { body }`."""
  return f"HloModule {name}\nENTRY e {{\n{body}\n}}"


def run_and_filecheck(hlo_text: str, pass_, expected: Optional[str], *,
                      execution_threads: Iterable[str] = frozenset(),
                      check_results: bool = False):
  """Runs `pass_` on the module `hlo_text`; see the module docstring.

  `expected` is FileCheck text matched against the printed module after
  the pass, which must then have reported a change; None means the pass
  must report no change and print the module unchanged. `check_results`
  also evaluates the module before and after on the same random inputs.
  Returns (changed, module)."""
  module = hlo_parser.parse_and_return_verified_module(hlo_text)
  before_text = module.to_string()
  before = module.clone() if check_results else None
  changed = pass_.run(module, frozenset(execution_threads))
  hlo_verifier.verify(module)
  after_text = module.to_string()
  if expected is None:
    assert not changed, (f"{pass_.name} reported a change where none was "
                         f"expected:\n{after_text}")
    assert after_text == before_text, (
        f"{pass_.name} changed the module but reported no change:\n"
        f"{after_text}")
  else:
    assert changed, (f"{pass_.name} reported no change:\n{after_text}")
    try:
      _filecheck.filecheck(after_text, expected)
    except _filecheck.FileCheckError as e:
      raise AssertionError(f"{e}\nmodule after {pass_.name}:\n"
                           f"{after_text}") from None
  if check_results:
    assert_same_results(before, module)
  return changed, module


def random_args(module, seed: int = 0) -> list[np.ndarray]:
  """One random array per entry parameter (array parameters only)."""
  rng = np.random.default_rng(seed)
  args = []
  for p in module.entry_computation.parameter_instructions:
    shape = p.shape
    if not shape.is_array():
      raise ValueError(f"parameter {p.name} is not an array")
    dtype = primitive_util.numpy_dtype(shape.element_type)
    if primitive_util.is_integral(shape.element_type):
      value = rng.integers(-5, 6, shape.dimensions)
    elif shape.element_type.name == "PRED":
      value = rng.integers(0, 2, shape.dimensions)
    else:
      value = rng.uniform(-2.0, 2.0, shape.dimensions)
    args.append(np.asarray(value).astype(dtype))
  return args


def assert_same_results(before, after, seed: int = 0) -> None:
  """Evaluates both modules on the same inputs; results must agree."""
  args = random_args(before, seed)
  want = HloEvaluator().evaluate(before, args)
  got = HloEvaluator().evaluate(after, args)
  assert len(want) == len(got)
  for w, g in zip(want, got):
    assert w.shape == g.shape
    np.testing.assert_allclose(np.asarray(g, np.float64),
                               np.asarray(w, np.float64), rtol=1e-5,
                               atol=1e-5)
