"""A test stand-in for xla.service.cpu.cpu_compiler with its public API
(`compile(module, options) -> executable` with `execute(args,
custom_calls=, donate=)`, `compile_stats`, `peak_memory_bytes`), built on
the HLO evaluator. Tests install it with `install(monkeypatch, calls)` to exercise the tools'
cpu-platform plumbing without the real compiler.
"""

from __future__ import annotations

import sys
import types

from xla.hlo.evaluator import hlo_evaluator


def make(calls: dict):
  """A module object; `calls` records what the tools asked of it."""

  class CpuCompileOptions:

    def __init__(self, **kwargs):
      calls["options"] = kwargs

  class CpuExecutable:
    compile_stats = {"passes": 0.25, "emit": 0.5}
    peak_memory_bytes = 3 << 20

    def __init__(self, module):
      self.module = module

    def execute(self, args, *, custom_calls=None, donate=()):
      del donate
      calls["executions"] = calls.get("executions", 0) + 1
      evaluator = hlo_evaluator.HloEvaluator(custom_calls=custom_calls)
      return evaluator.evaluate(self.module, args)

  def compile_(module, options=None):
    calls.setdefault("compiled", []).append(module.name)
    calls["options_obj"] = options
    return CpuExecutable(module)

  return types.SimpleNamespace(compile=compile_,
                               CpuCompileOptions=CpuCompileOptions)


def install(monkeypatch, calls: dict):
  """Makes `importlib.import_module("xla.service.cpu.cpu_compiler")` return
  the fake for the rest of the test."""
  fake = make(calls)
  monkeypatch.setitem(sys.modules, "xla.service.cpu.cpu_compiler", fake)
  return fake
