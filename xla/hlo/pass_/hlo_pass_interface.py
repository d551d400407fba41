"""The HLO pass interface (xla/hlo/pass/hlo_pass_interface.h).

A pass has a `name` and a `run(module, execution_threads=()) -> bool` that
transforms the module in place and says whether it changed anything. Passes
that work one computation at a time derive from `HloModulePass` and use
`computations_to_run` to honour `execution_threads`.

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
