"""The reference interpreter's dispatch loop (spec section "Execution").

Kept apart from the kernels: a kernel is registered in the op registry under
the op's name (`registry.register_interpreter(name, kernel)`) and has the
signature

    kernel(ctx: Context, op: core.Operation, args: list) -> value | list

`args` are the runtime values of the op's operands (see `runtime`). A kernel
returns a list of result values, or a single value for a one-result op (a
Python `tuple` is a single tuple-typed value, never a result list). Kernels
evaluate nested regions with `ctx.run_region(region, args)`, call functions
with `ctx.call(symbol, args)`, and find their process (collectives) in
`ctx.process`.

Values live in a `Scope` per function invocation: SSA values are unique
objects, so one dict per invocation serves the nested regions too, and a
region that runs again (a while body) just overwrites its entries.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable, Optional

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.ops import registry
import support

_TERMINATORS = frozenset(("func.return", "stablehlo.return", "chlo.return"))

# Set by the quantization module: `wrap(op, kernel) -> kernel` gives the
# kernel to run for an op with quantized operands or results (the spec's
# dequantize -> float op -> quantize semantics), or the kernel itself where
# the op handles quantized values natively.
quantized_kernel_hook: Optional[Callable] = None


def _has_quantized(op: core.Operation) -> bool:
  for v in list(op.operands) + list(op.results):
    if isinstance(t.element_type_of(v.type), t.QuantizedType):
      return True
  return False


class InterpreterError(support.XlaError, RuntimeError):
  """A runtime error while interpreting; the message starts with the
  location of the op that failed (`file:line:col: error: ...`)."""

  code = support.StatusCode.INTERNAL


class CheckFailure(InterpreterError):
  """A `check.*` op (or `@check.*` custom call) found a mismatch."""

  code = support.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(InterpreterError):
  """A while loop ran past the step limit or the run past its deadline."""

  code = support.StatusCode.RESOURCE_EXHAUSTED


@dataclasses.dataclass
class Options:
  """Interpreter limits and outputs.

  max_while_iterations: a single while loop running more iterations than
    this is stopped with a ResourceExhausted error (None: no limit).
  timeout_s: wall-clock limit for one `run` (None: no limit).
  out: where `interpreter.print` writes (default sys.stdout).
  probe_dir: folder for `interpreter.probe` outputs (None: kept in memory).
  print_dense: print tensors as `dense<...>` attributes.
  """

  max_while_iterations: Optional[int] = 10_000_000
  timeout_s: Optional[float] = None
  out: Any = None
  probe_dir: Optional[str] = None
  print_dense: bool = False


def location_of(op: core.Operation) -> str:
  loc = op.location
  if loc is not None and loc.kind == "file" and loc.filename is not None:
    return f"{loc.filename}:{loc.line}:{loc.col}"
  return "<unknown>"


class Context:
  """What a kernel sees of the running program: one per function
  invocation (and per process)."""

  __slots__ = ("interp", "scope", "process", "deadline")

  def __init__(self, interp: "Interpreter", process=None, deadline=None):
    self.interp = interp
    self.scope: dict = {}
    self.process = process
    self.deadline = deadline

  @property
  def module(self) -> core.Module:
    return self.interp.module

  @property
  def options(self) -> Options:
    return self.interp.options

  def run_region(self, region: core.Region, args) -> list:
    """Runs `region`'s entry block with `args` bound to its arguments and
    returns the operands of its terminator."""
    return self.interp.run_block(self, region.blocks[0], args)

  def call(self, symbol: str, args) -> list:
    return self.interp.call(symbol, args, process=self.process,
                            deadline=self.deadline)

  def tick(self, iterations: int, op: core.Operation) -> None:
    """Called by loops once per iteration; enforces the limits."""
    limit = self.interp.options.max_while_iterations
    if limit is not None and iterations > limit:
      raise ResourceExhausted(
          f"{location_of(op)}: error: {op.name} ran more than {limit} "
          "iterations (the limit is set by --max-while-iterations)")
    if self.deadline is not None and time.monotonic() > self.deadline:
      raise ResourceExhausted(
          f"{location_of(op)}: error: {op.name}: the run exceeded its time "
          f"limit of {self.interp.options.timeout_s} s (--timeout)")


def _wrap_error(op: core.Operation, e: BaseException) -> InterpreterError:
  if isinstance(e, InterpreterError):
    return e
  msg = str(e) or type(e).__name__
  cls = InterpreterError
  if isinstance(e, support.XlaError):
    # Keep the status category (Unimplemented, InvalidArgument, ...) so
    # callers can tell "not supported" from "wrong input".
    cls = _located_class(type(e))
  err = cls(f"{location_of(op)}: error: {op.name}: {msg}")
  return err


_LOCATED: dict = {}


def _located_class(base: type) -> type:
  cls = _LOCATED.get(base)
  if cls is None:
    cls = type(base.__name__, (InterpreterError, base), {})
    _LOCATED[base] = cls
  return cls


class Interpreter:
  """Runs the functions of one module. State that persists across calls of
  the same program instance (ml_program globals, probe records) lives
  here."""

  def __init__(self, module: core.Module, options: Optional[Options] = None):
    self.module = module
    self.options = options or Options()
    self.globals: dict[str, Any] = {}
    self.probes: dict[str, Any] = {}
    self.soft_failures: list[str] = []
    # func.func op id -> its upstream SSA names (interpreter.print prefixes).
    self.print_names: dict[int, Any] = {}
    self.print_lock = threading.Lock()
    self._symbols = {}
    for op in module.body.operations:
      sym = op.attr("sym_name")
      if isinstance(sym, a.StringAttr):
        self._symbols[sym.value] = op
    self._kernels: dict[str, Callable] = {}
    self._op_kernels: dict[core.Operation, Callable] = {}

  # --- entry points ------------------------------------------------------------

  def entry_function(self, name: Optional[str] = None) -> str:
    """`name`, else @main, else the module's only function."""
    funcs = [op for op in self.module.body.operations
             if op.name == "func.func" and op.regions and
             op.regions[0].blocks]
    names = [f.attr("sym_name").value for f in funcs]
    if name is not None:
      if name not in names:
        raise support.NotFoundError(f"no function named @{name}")
      return name
    if "main" in names:
      return "main"
    if len(names) == 1:
      return names[0]
    raise support.InvalidArgumentError(
        "the module has no @main and more than one function; name the "
        f"function to run (functions: {', '.join('@' + n for n in names)})")

  def run(self, name: Optional[str] = None, args=(), process=None) -> list:
    """Runs a function (see `entry_function`) on `args` (numpy arrays);
    returns its results. Floating-point warnings are silenced: the spec
    defines the results (inf, nan, wrap-around)."""
    fn = self.entry_function(name)
    deadline = None
    if self.options.timeout_s is not None:
      deadline = time.monotonic() + self.options.timeout_s
    with np.errstate(all="ignore"):
      return self.call(fn, list(args), process=process, deadline=deadline)

  def call(self, symbol: str, args, process=None, deadline=None) -> list:
    fn = self._symbols.get(symbol)
    if fn is None or fn.name != "func.func":
      raise support.NotFoundError(f"no function named @{symbol}")
    if not fn.regions or not fn.regions[0].blocks:
      raise support.UnimplementedError(
          f"function @{symbol} is only a declaration")
    block = fn.regions[0].blocks[0]
    if len(args) != len(block.arguments):
      raise support.InvalidArgumentError(
          f"@{symbol} takes {len(block.arguments)} arguments, got "
          f"{len(args)}")
    ctx = Context(self, process, deadline)
    return self.run_block(ctx, block, args)

  # --- the dispatch loop -------------------------------------------------------

  def kernel(self, name: str) -> Callable:
    k = self._kernels.get(name)
    if k is None:
      d = registry.lookup(name)
      k = d.interpreter if d is not None else None
      if k is None:
        reason = d.unsupported.get("interpreter") if d is not None else None
        raise support.UnimplementedError(
            f"the interpreter has no kernel for '{name}'" +
            (f": {reason}" if reason else ""))
      self._kernels[name] = k
    return k

  def _op_kernel(self, op: core.Operation) -> Callable:
    k = self._kernels.get(op.name) or self.kernel(op.name)
    if quantized_kernel_hook is not None and _has_quantized(op):
      k = quantized_kernel_hook(op, k)
    self._op_kernels[op] = k
    return k

  def run_block(self, ctx: Context, block: core.Block, args) -> list:
    scope = ctx.scope
    if len(args) != len(block.arguments):
      raise support.InvalidArgumentError(
          f"block takes {len(block.arguments)} arguments, got {len(args)}")
    for v, x in zip(block.arguments, args):
      scope[v] = x
    for op in block.operations:
      if op.name in _TERMINATORS:
        try:
          return [scope[v] for v in op.operands]
        except KeyError:
          raise InterpreterError(
              f"{location_of(op)}: error: {op.name}: an operand has no "
              "value (used outside the scope that defines it)") from None
      try:
        k = self._op_kernels.get(op)
        if k is None:
          k = self._op_kernel(op)
        out = k(ctx, op, [scope[v] for v in op.operands])
      except InterpreterError:
        raise
      except Exception as e:  # a kernel failed: locate it, keep the kind
        raise _wrap_error(op, e) from e
      results = op.results
      if type(out) is not list:
        out = [out]
      if len(out) != len(results):
        raise InterpreterError(
            f"{location_of(op)}: error: {op.name}: kernel returned "
            f"{len(out)} values for {len(results)} results")
      for v, x in zip(results, out):
        if type(x) is not np.ndarray:
          x = runtime.as_result(x, v.type)
        scope[v] = x
    return []


def region_binary_op(region: core.Region) -> Optional[str]:
  """If `region` is `^bb(%a, %b): %r = OP %a, %b; return %r` (the usual
  reduction body, either operand order), the op name; else None. Kernels use
  it to replace a per-element region call with a vectorized numpy op."""
  if len(region.blocks) != 1:
    return None
  b = region.blocks[0]
  if len(b.arguments) != 2 or len(b.operations) != 2:
    return None
  # A body on quantized scalars computes in the expressed type; a numpy op
  # on the stored integers would be wrong.
  if any(isinstance(t.element_type_of(v.type), t.QuantizedType)
         for v in b.arguments):
    return None
  op, ret = b.operations
  if ret.name not in _TERMINATORS or len(ret.operands) != 1:
    return None
  if ret.operands[0] is not (op.results[0] if len(op.results) == 1 else None):
    return None
  if len(op.operands) != 2 or set(op.operands) != set(b.arguments):
    return None
  if op.operands[0] is not b.arguments[0]:
    d = registry.lookup(op.name)
    if d is None or registry.COMMUTATIVE not in d.traits:
      return None
  return op.name
