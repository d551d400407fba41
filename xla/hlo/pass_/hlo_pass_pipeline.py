"""A sequence of HLO passes that is itself a pass
(xla/hlo/pass/hlo_pass_pipeline.h).

  pipeline = HloPassPipeline("simplify")
  pipeline.add_pass(HloDCE())
  pipeline.add_pass(HloPassFix(AlgebraicSimplifier()))
  changed = pipeline.run(module)

Around the passes the pipeline:
  * verifies the module before the first pass and after every pass that
    ran (the HLO verifier, then any `add_invariant_checker` callables); a
    failure raises HloVerifierError naming the pass that broke the module
    (or "pipeline-start" when the input was already broken);
  * skips passes named in --xla_disable_hlo_passes, and, when
    --xla_enable_hlo_passes_only is set, every pass not named there (the
    names are those of the passes, nested pipelines included);
  * when --xla_dump_to=DIR is set, writes the module text after every pass
    that ran to DIR/<module>.<NNNN>.<pass>.txt, NNNN counting the dumps of
    that module in this process; --xla_dump_hlo_pass_re=REGEX restricts the
    dumps to passes whose name it matches (`re.search`; empty: all).
  * records `(pass name, changed)` of the last run in `run_history`.
"""

from __future__ import annotations

import os
import re
import weakref
from typing import Callable, Optional

import support
from support import flags
from support import log
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.service import hlo_verifier

DISABLE_HLO_PASSES = flags.define_list(
    "xla_disable_hlo_passes", "",
    "Comma-separated names of HLO passes that pipelines skip.")
ENABLE_HLO_PASSES_ONLY = flags.define_list(
    "xla_enable_hlo_passes_only", "",
    "If set, pipelines run only the HLO passes named here (comma-separated).")
DUMP_TO = flags.define_string(
    "xla_dump_to", "",
    "Directory to which pipelines write the HLO text after each pass.")
DUMP_HLO_PASS_RE = flags.define_string(
    "xla_dump_hlo_pass_re", "",
    "With --xla_dump_to, dump only after passes whose name matches this "
    "regular expression (empty: after every pass).")

InvariantChecker = Callable[[object], None]

# Dumps written so far per module, for the NNNN in the file names.
_dump_counts: "weakref.WeakKeyDictionary[object, int]" = (
    weakref.WeakKeyDictionary())

_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")


def _file_part(name: str) -> str:
  return _UNSAFE_FILE_CHARS.sub("_", name) or "_"


def dump_file_name(module_name: str, number: int, pass_name: str) -> str:
  """`<module>.<NNNN>.<pass>.txt`, with characters unsafe in file names
  replaced by '_'."""
  return f"{_file_part(module_name)}.{number:04d}.{_file_part(pass_name)}.txt"


class HloPassPipeline(hpi.HloPassInterface):
  """See the module docstring."""

  def __init__(self, name: str, verify: bool = True):
    self._name = name
    self.verify = verify
    self._passes: list[hpi.HloPassInterface] = []
    self._invariant_checkers: list[tuple[str, InvariantChecker]] = []
    self.run_history: list[tuple[str, bool]] = []

  @property
  def name(self) -> str:
    return self._name

  def is_pass_pipeline(self) -> bool:
    return True

  @property
  def passes(self) -> tuple[hpi.HloPassInterface, ...]:
    return tuple(self._passes)

  def add_pass(self, pass_: hpi.HloPassInterface) -> hpi.HloPassInterface:
    """Appends `pass_` and returns it."""
    if not isinstance(pass_, hpi.HloPassInterface):
      raise support.InvalidArgumentError(
          f"pipeline {self.name}: add_pass needs an HloPassInterface, got "
          f"{type(pass_).__name__}")
    self._passes.append(pass_)
    return pass_

  def add_invariant_checker(self, checker: InvariantChecker,
                            name: Optional[str] = None) -> None:
    """Runs `checker(module)` wherever the verifier runs; it raises a
    support.XlaError when an invariant does not hold."""
    self._invariant_checkers.append(
        (name or getattr(checker, "__name__", "invariant-checker"), checker))

  # -- running -----------------------------------------------------------------

  def _enabled(self, pass_: hpi.HloPassInterface) -> bool:
    if pass_.name in DISABLE_HLO_PASSES.value:
      return False
    only = ENABLE_HLO_PASSES_ONLY.value
    return not only or pass_.name in only

  def _check(self, module, after: str) -> None:
    checkers: list[tuple[str, InvariantChecker]] = []
    if self.verify:
      checkers.append(("hlo-verifier", hlo_verifier.verify))
    checkers.extend(self._invariant_checkers)
    for checker_name, checker in checkers:
      try:
        checker(module)
      except support.XlaError as e:
        where = ("before its first pass" if after == "pipeline-start" else
                 f"after pass '{after}'")
        raise hlo_verifier.HloVerifierError(
            f"{checker_name} failed in pipeline '{self.name}' {where} on "
            f"module '{module.name}': {e}") from e

  def _maybe_dump(self, module, pass_name: str) -> None:
    directory = DUMP_TO.value
    if not directory:
      return
    pattern = DUMP_HLO_PASS_RE.value
    if pattern:
      try:
        if not re.search(pattern, pass_name):
          return
      except re.error as e:
        raise support.InvalidArgumentError(
            f"flag --xla_dump_hlo_pass_re: bad regular expression "
            f"{pattern!r}: {e}") from None
    number = _dump_counts.get(module, 0)
    _dump_counts[module] = number + 1
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory,
                        dump_file_name(module.name, number, pass_name))
    with open(path, "w", encoding="utf-8") as f:
      f.write(module.to_string())
    log.vlog(1, "dumped module %s after %s to %s", module.name, pass_name,
             path)

  def run(self, module, execution_threads=frozenset()) -> bool:
    self.run_history = []
    self._check(module, "pipeline-start")
    changed_any = False
    for pass_ in self._passes:
      if not self._enabled(pass_):
        log.vlog(1, "pipeline %s: skipping disabled pass %s", self.name,
                 pass_.name)
        continue
      log.vlog(1, "pipeline %s: running %s on module %s", self.name,
               pass_.name, module.name)
      try:
        changed = bool(pass_.run(module, execution_threads))
      except support.XlaError as e:
        if hasattr(e, "add_note"):
          e.add_note(f"(in HLO pass '{pass_.name}' of pipeline "
                     f"'{self.name}')")
        raise
      self.run_history.append((pass_.name, changed))
      changed_any |= changed
      log.vlog(2, "pipeline %s: %s changed=%s", self.name, pass_.name,
               changed)
      self._check(module, pass_.name)
      self._maybe_dump(module, pass_.name)
    return changed_any
