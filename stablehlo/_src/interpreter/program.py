"""Kernels for the program structure: constants, calls, composites,
custom calls and ml_program globals.

Custom-call targets are looked up in a registry of Python callables
(`register_custom_call`); an unknown target is an Unimplemented error naming
it, never a silent no-op.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import attributes as a
from stablehlo._src.ops import registry
import support

_CUSTOM_CALLS: dict[str, Callable] = {}
_CC_LOCK = threading.Lock()


def register_custom_call(target: str, fn: Callable) -> None:
  """Registers `fn(ctx, op, args) -> value | list` as the implementation of
  `stablehlo.custom_call @target`. Re-registering replaces it."""
  with _CC_LOCK:
    _CUSTOM_CALLS[target] = fn


def custom_call_targets() -> list[str]:
  return sorted(_CUSTOM_CALLS)


def _symbol(attr) -> str:
  if isinstance(attr, a.SymbolRefAttr):
    return attr.root
  if isinstance(attr, a.StringAttr):
    return attr.value
  raise support.InvalidArgumentError(f"expected a symbol reference, got "
                                     f"{attr!r}")


@registry.interpreter_kernel("stablehlo.constant", "chlo.constant")
def _constant(ctx, op, args):
  """spec: constant - the value of the `value` attribute."""
  return runtime.from_attr(op.attr("value"), ctx.module)


@registry.interpreter_kernel("func.call")
def _call(ctx, op, args):
  return list(ctx.call(_symbol(op.attr("callee")), args))


@registry.interpreter_kernel("stablehlo.composite")
def _composite(ctx, op, args):
  """spec: composite - semantically its decomposition function."""
  return list(ctx.call(_symbol(op.attr("decomposition")), args))


@registry.interpreter_kernel("stablehlo.custom_call")
def _custom_call(ctx, op, args):
  target = op.attr("call_target_name")
  name = target.value if isinstance(target, a.StringAttr) else str(target)
  fn = _CUSTOM_CALLS.get(name)
  if fn is None:
    raise support.UnimplementedError(
        f"custom_call target '{name}' is not registered with the "
        "interpreter (register it with "
        "stablehlo.interpreter.register_custom_call)")
  out = fn(ctx, op, args)
  if out is None:
    return []
  return out


# --- ml_program globals: state that lives as long as the Interpreter. ---------


def _global_op(ctx, op):
  name = _symbol(op.attr("global"))
  g = ctx.interp._symbols.get(name)
  if g is None or g.name != "ml_program.global":
    raise support.NotFoundError(f"no ml_program.global named @{name}")
  return name, g


def _global_value(ctx, op):
  name, g = _global_op(ctx, op)
  state = ctx.interp.globals
  if name not in state:
    init = g.attr("value")
    if init is None:
      raise support.FailedPreconditionError(
          f"global @{name} is read before it was ever stored")
    state[name] = runtime.from_attr(init, ctx.module)
  return state[name]


@registry.interpreter_kernel(
    "ml_program.global_load",
    "ml_program.global_load_const")
def _global_load(ctx, op, args):
  return _global_value(ctx, op).copy()


@registry.interpreter_kernel("ml_program.global_store")
def _global_store(ctx, op, args):
  name, g = _global_op(ctx, op)
  if g.attr("is_mutable") is None:
    raise support.FailedPreconditionError(
        f"global @{name} is not mutable")
  ctx.interp.globals[name] = np.array(args[0], copy=True)
  return []


# Ops the dispatch loop handles itself or that never execute, and ops
# deliberately left out; the status table shows the reasons.
_NOT_KERNELS = {
    "builtin.module": "structural: holds the program, not executed",
    "func.func": "structural: run through func.call or as the entry",
    "func.return": "terminator: handled by the dispatch loop",
    "stablehlo.return": "terminator: handled by the dispatch loop",
    "ml_program.global": "declaration: read by global_load / global_store",
    "builtin.unrealized_conversion_cast": "left by partial conversions; "
                                          "not a runnable op",
    "stablehlo.torch_index_select": "deprecated, not in the spec; use "
                                    "gather",
}
# Shardy ops describe how a program is partitioned; the interpreter runs
# programs without them (a partitioned program, or one whose annotations
# were removed for a single device as the PJRT plugin does).
_NOT_KERNELS.update({name: "Shardy (sdy) op: run the program after "
                     "partitioning or with its shardings removed"
                     for name in registry.names("sdy")})
for _name, _reason in _NOT_KERNELS.items():
  if registry.lookup(_name) is not None:
    registry.mark_unsupported(_name, "interpreter", _reason)
