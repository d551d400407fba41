"""Runs a pass until it stops changing the module (xla/hlo/pass/hlo_pass_fix.h).

`HloPassFix(pass_)` is itself a pass with the wrapped pass's name. It runs
the wrapped pass again while it reports a change, at most `max_iterations`
times. Hitting the cap means the pass did not converge (two rewrites undo
each other, or a rewrite keeps growing the module): by default that is
logged as a warning and the module is returned as it is, as XLA does;
`on_limit="error"` raises InternalError instead, for tests and debugging.
"""

from __future__ import annotations

import support
from support import log
from xla.hlo.pass_ import hlo_pass_interface as hpi

DEFAULT_MAX_ITERATIONS = 25  # XLA's kIterationLimit.


class HloPassFix(hpi.HloPassInterface):
  """See the module docstring."""

  def __init__(self, pass_: hpi.HloPassInterface,
               max_iterations: int = DEFAULT_MAX_ITERATIONS,
               on_limit: str = "warn"):
    if max_iterations < 1:
      raise support.InvalidArgumentError(
          f"HloPassFix({pass_.name}): max_iterations must be >= 1, got "
          f"{max_iterations}")
    if on_limit not in ("warn", "error"):
      raise support.InvalidArgumentError(
          f"HloPassFix({pass_.name}): on_limit must be 'warn' or 'error', "
          f"got {on_limit!r}")
    self.wrapped = pass_
    self.max_iterations = max_iterations
    self.on_limit = on_limit
    self.iterations_run = 0  # of the last run(), for logs and tests

  @property
  def name(self) -> str:
    return self.wrapped.name

  def is_pass_pipeline(self) -> bool:
    return self.wrapped.is_pass_pipeline()

  def run(self, module, execution_threads=frozenset()) -> bool:
    changed_any = False
    self.iterations_run = 0
    while True:
      if self.iterations_run == self.max_iterations:
        message = (f"HloPassFix: pass '{self.name}' still changed module "
                   f"'{module.name}' after {self.max_iterations} iterations; "
                   f"it does not reach a fixed point")
        if self.on_limit == "error":
          raise support.InternalError(message)
        log.warning("%s", message)
        return changed_any
      changed = self.wrapped.run(module, execution_threads)
      self.iterations_run += 1
      log.vlog(3, "HloPassFix %s iteration %d: changed=%s", self.name,
               self.iterations_run, changed)
      if not changed:
        return changed_any
      changed_any = True
