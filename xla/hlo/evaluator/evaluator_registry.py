"""The HLO evaluator's kernel table: one entry per HloOpcode.

A leaf module: the modules that define kernels (`elementwise.py`,
`structural.py`, and `hlo_evaluator.py` for the opcodes that call
computations or build tuples) register each kernel where it is defined, and
`HloEvaluator` looks kernels up here.

  @evaluator_registry.elementwise_kernel(HloOpcode.kAbs)
  def _abs(instr, x): ...           # operand arrays in, array out (cast to
                                    # the result's element type); such an
                                    # instruction may run on arrays of any
                                    # shape inside a batched computation
  @evaluator_registry.evaluator_kernel(HloOpcode.kSlice)
  def _slice(evaluator, instr, operands): ...   # any operand values, the
                                                # evaluator for computations

A kernel a factory builds registers with `register_kernel(opcode, fn,
elementwise=...)`. An opcode has at most one kernel.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from xla.hlo.ir.hlo_opcode import HloOpcode


@dataclasses.dataclass(frozen=True)
class Kernel:
  """`fn(instr, *operand arrays)` when `elementwise`, else
  `fn(evaluator, instr, operand values)`."""
  fn: Callable
  elementwise: bool


KERNELS: dict[HloOpcode, Kernel] = {}


def register_kernel(opcode: HloOpcode, fn: Callable, *,
                    elementwise: bool = False) -> Callable:
  """Makes `fn` the kernel of `opcode`; returns `fn`."""
  if opcode in KERNELS:
    raise ValueError(f"HLO evaluator: a second kernel for {opcode.value}")
  KERNELS[opcode] = Kernel(fn, elementwise)
  return fn


def evaluator_kernel(*opcodes: HloOpcode) -> Callable:
  """Decorator: registers `fn(evaluator, instr, operands)` for `opcodes`."""

  def wrap(fn):
    for opcode in opcodes:
      register_kernel(opcode, fn)
    return fn

  return wrap


def elementwise_kernel(*opcodes: HloOpcode) -> Callable:
  """Decorator: registers `fn(instr, *operand arrays)` for `opcodes`."""

  def wrap(fn):
    for opcode in opcodes:
      register_kernel(opcode, fn, elementwise=True)
    return fn

  return wrap


def kernel_function(opcode: HloOpcode) -> Optional[Callable]:
  """The function registered for `opcode`, or None."""
  k = KERNELS.get(opcode)
  return None if k is None else k.fn


def elementwise_opcodes() -> frozenset[HloOpcode]:
  return frozenset(op for op, k in KERNELS.items() if k.elementwise)
