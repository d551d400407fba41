"""The HLO pass interface (xla/hlo/pass/hlo_pass_interface.h).

A pass has a `name` and a `run(module, execution_threads=()) -> bool` that
transforms the module in place and says whether it changed anything. Passes
that work one computation at a time derive from `HloComputationPass` and
implement `run_on_computation`; the base visits `computations_to_run`
(which honours `execution_threads`), skipping fusion computations unless
the pass asks for them. Other passes derive from `HloModulePass`.

`execution_threads` is a set of thread names; empty means every thread, as
in XLA, where computations of other threads are left alone.
"""

from __future__ import annotations

import abc
from typing import AbstractSet, Iterable

ExecutionThreads = AbstractSet[str]


def thread_included(thread: str, execution_threads: Iterable[str]) -> bool:
  """True if `thread` is one of `execution_threads` (empty: all are)."""
  threads = frozenset(execution_threads)
  return not threads or thread in threads


def computations_to_run(module, execution_threads: Iterable[str] = ()):
  """The module's computations on the given threads, callees first (the
  order most passes want: a computation's callees are simplified before
  its call sites are looked at)."""
  threads = frozenset(execution_threads)
  return [c for c in module.make_computation_post_order()
          if thread_included(c.execution_thread, threads)]


class HloPassInterface(abc.ABC):
  """Base of every HLO pass; see the module docstring."""

  @property
  @abc.abstractmethod
  def name(self) -> str:
    """The pass name, used in dumps, logs and --xla_disable_hlo_passes."""

  @abc.abstractmethod
  def run(self, module, execution_threads: ExecutionThreads = frozenset()
          ) -> bool:
    """Transforms `module` in place; returns True if it changed."""

  def is_pass_pipeline(self) -> bool:
    return False

  def __repr__(self) -> str:
    return f"<{type(self).__name__} {self.name}>"


class HloModulePass(HloPassInterface):
  """A pass over a whole module (the common case)."""


class HloComputationPass(HloModulePass):
  """A pass that transforms one computation at a time.

  `run` calls `run_on_computation(comp, context)` for each computation of
  `computations(module, execution_threads)` - by default
  `computations_to_run` (callees first) less the fusion computations, which
  a subclass sets `skip_fusion_computations = False` to include - and ORs
  the results. Hooks for passes that need module-level state:
    `module_context(module)`: made once per run and handed to every
      `run_on_computation` call (e.g. a cache shared by all computations);
      None by default.
    `finish_module(module, execution_threads, changed)`: runs after the
      last computation; returns the final `changed` (e.g. after removing
      computations that became dead).
  The computation list is taken before the first computation is visited,
  so computations a step creates are not visited in the same run.
  """

  skip_fusion_computations: bool = True

  @abc.abstractmethod
  def run_on_computation(self, comp, context=None) -> bool:
    """Transforms `comp` in place; returns True if it changed."""

  def computations(self, module, execution_threads: Iterable[str] = ()):
    comps = computations_to_run(module, execution_threads)
    if self.skip_fusion_computations:
      comps = [c for c in comps if not c.is_fusion_computation()]
    return comps

  def module_context(self, module):  # pylint: disable=unused-argument
    return None

  def finish_module(self, module, execution_threads: ExecutionThreads,
                    changed: bool) -> bool:  # pylint: disable=unused-argument
    return changed

  def run(self, module, execution_threads: ExecutionThreads = frozenset()
          ) -> bool:
    context = self.module_context(module)
    changed = False
    for comp in self.computations(module, execution_threads):
      changed |= self.run_on_computation(comp, context)
    return self.finish_module(module, execution_threads, changed)
