"""Fills the op registry's `hlo_evaluator` and `cpu_codegen` slots with the
functions that evaluate and emit the HLO opcode each StableHLO op lowers to,
so that `python -m stablehlo.tools.status_table --where stablehlo.slice`
can name every file a change to one op touches. Importing this module does
it (status_table loads it for --where when it can be imported).

The StableHLO -> HLO opcode mapping is by name (`stablehlo.dynamic_slice`
-> `dynamic-slice`) with the few renames in `_RENAMES`; ops without an HLO
opcode of their own (composites, calls, CHLO) get no entries.
"""

from __future__ import annotations

from typing import Any, Optional

from stablehlo import ops as shlo_ops
from xla.hlo.evaluator import evaluator_registry
# hlo_evaluator imports every module that registers an evaluator kernel.
from xla.hlo.evaluator import hlo_evaluator  # pylint: disable=unused-import
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import coverage
from xla.service.cpu import elemental_generator
from xla.service.cpu import elemental_ir_emitter
from xla.service.cpu import fusion_emitter
from xla.service.cpu import ir_emitter
from xla.service.cpu import kernel_api
from xla.service.cpu import thunk_emitter
from xla.translate import lowerings  # pylint: disable=unused-import
from xla.translate import lowerings_regions  # pylint: disable=unused-import

registry = shlo_ops.registry

# StableHLO short name -> HLO opcode name, where they differ.
_RENAMES = {
    "broadcast_in_dim": "broadcast", "dot_general": "dot",
    "if": "conditional", "case": "conditional", "custom_call": "custom-call",
    "uniform_quantize": None, "uniform_dequantize": None,
    "composite": None,
}

# Opcodes the CPU core emits itself (ir_emitter.CORE_KERNEL_OPCODES).
_CORE = {
    HloOpcode.kFusion: fusion_emitter.emit_fusion,
    HloOpcode.kReduce: fusion_emitter.emit_reduce,
    HloOpcode.kDynamicUpdateSlice: ir_emitter.emit_dynamic_update_slice,
}


def hlo_opcode(op_name: str) -> Optional[HloOpcode]:
  """The HLO opcode `op_name` (e.g. "stablehlo.slice") lowers to, if any."""
  dialect, _, short = op_name.partition(".")
  if dialect != "stablehlo":
    return None
  name = _RENAMES.get(short, short.replace("_", "-"))
  if name is None:
    return None
  try:
    return HloOpcode(name)
  except ValueError:
    return None


def evaluator_kernel(opcode: HloOpcode) -> Any:
  return evaluator_registry.kernel_function(opcode)


def cpu_emitter(opcode: HloOpcode) -> Any:
  """The function that emits `opcode` on the CPU backend (an elemental
  handler, a core kernel, a registered kernel emitter), or the thunk
  emitter for opcodes that run as thunks; None if none does."""
  if opcode in _CORE:
    return _CORE[opcode]
  if opcode.value in ir_emitter.EMITTERS:
    ir_emitter.emitter_for(opcode.value)
    return kernel_api.kernel_emitter(opcode.value)
  handler = elemental_generator.opcode_handler(opcode)
  if handler is not None:
    return handler
  handler = elemental_ir_emitter.opcode_emitter(opcode)
  if handler is not None:
    return handler
  if coverage.classify(opcode)[0] == coverage.THUNK:
    return thunk_emitter.ThunkEmitter.emit_instruction
  return None


def register_all() -> int:
  """Fills the two slots for every op that lowers to an HLO opcode; returns
  how many ops got at least one."""
  count = 0
  for d in registry.all_ops():
    opcode = hlo_opcode(d.name)
    if opcode is None:
      continue
    kernel, emitter = evaluator_kernel(opcode), cpu_emitter(opcode)
    if kernel is not None:
      registry.set_slot(d.name, "hlo_evaluator", kernel)
    if emitter is not None:
      registry.set_slot(d.name, "cpu_codegen", emitter)
    count += kernel is not None or emitter is not None
  return count


register_all()
