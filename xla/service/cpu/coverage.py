"""Which HLO opcodes the CPU backend compiles, and how.

    python -m xla.service.cpu.coverage [--markdown]

prints one row per opcode of xla/hlo/ir/hlo_opcode.py:

  codegen        an LLVM kernel: by the core (fusions, reduce, dynamic-
                 update-slice, everything the element generator produces)
                 or by the emitter module registered for the opcode
  thunk          handled by the runtime without a kernel of its own (control
                 flow, custom calls, copies, buffer aliases such as tuple /
                 get-tuple-element / bitcast, or rewritten away before
                 emission such as call and async wrappers)
  unimplemented  compiling it raises UnimplementedError; the reason says why
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from xla.hlo.ir import hlo_opcode
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import elemental_generator
from xla.service.cpu import elemental_ir_emitter as eie
from xla.service.cpu import ir_emitter
from xla.service.cpu import kernel_api

O = HloOpcode

CODEGEN = "codegen"
THUNK = "thunk"
UNIMPLEMENTED = "unimplemented"

# Opcodes the runtime handles without emitting a kernel for them.
_THUNK_OPCODES = {
    O.kParameter: "argument buffer, read in place",
    O.kConstant: "buffer filled at load time (arrays in fusions: LLVM "
                 "globals)",
    O.kTuple: "buffer alias (no copy)",
    O.kGetTupleElement: "buffer alias (no copy)",
    O.kBitcast: "buffer alias (no copy)",
    O.kAddDependency: "buffer alias of operand 0",
    O.kAfterAll: "token (no storage)",
    O.kDomain: "buffer alias",
    O.kOptimizationBarrier: "buffer alias",
    O.kWhile: "WhileThunk (carry updated in place)",
    O.kConditional: "ConditionalThunk",
    O.kCall: "inlined before emission (SequenceThunk otherwise)",
    O.kCustomCall: "CustomCallThunk (Python handler from custom_calls)",
    O.kCopy: "CopyThunk (memmove), or nothing when the buffers coincide",
    O.kCopyStart: "CopyThunks into the destination",
    O.kCopyDone: "CopyThunk from the copy-start destination",
    O.kAsyncStart: "rewritten to a call of its computation, then inlined",
    O.kAsyncUpdate: "rewritten away with its async-start",
    O.kAsyncDone: "rewritten away with its async-start",
}

# Why the remaining opcodes are not compiled.
_REASONS = {
    O.kBatchNormGrad: "needs a batch-norm expander pass (not in the CPU "
                      "pipeline)",
    O.kBatchNormInference: "needs a batch-norm expander pass (not in the CPU "
                           "pipeline)",
    O.kBatchNormTraining: "needs a batch-norm expander pass (not in the CPU "
                          "pipeline)",
    O.kInfeed: "host transfers are not supported",
    O.kOutfeed: "host transfers are not supported",
    O.kSend: "host transfers are not supported",
    O.kSendDone: "host transfers are not supported",
    O.kRecv: "host transfers are not supported",
    O.kRecvDone: "host transfers are not supported",
    O.kDynamicReshape: "dynamic shapes are not supported",
    O.kSetDimensionSize: "dynamic shapes are not supported",
    O.kRng: "stateful rng is not supported (use rng-bit-generator)",
    O.kRngGetAndUpdateState: "stateful rng is not supported",
    O.kStochasticConvert: "the elemental emitter does not implement it",
}


def classify(opcode: HloOpcode) -> tuple[str, str]:
  """(status, detail) of `opcode` on the CPU backend."""
  ir_emitter.load_emitter_modules()
  if opcode in _THUNK_OPCODES:
    return THUNK, _THUNK_OPCODES[opcode]
  if opcode in ir_emitter.CORE_KERNEL_OPCODES:
    return CODEGEN, "core (" + {
        O.kFusion: "loop / input fusion kernels; other kinds via a "
                   "registered 'fusion' emitter",
        O.kReduce: "reduction kernels, vectorized row folds",
        O.kDynamicUpdateSlice: "in place when sharing operand 0's buffer",
    }.get(opcode, "scalar kernel") + ")"
  emitter = kernel_api.kernel_emitter(opcode.value)
  if emitter is not None:
    module = getattr(emitter, "__module__", "?").rsplit(".", 1)[-1]
    return CODEGEN, f"registered emitter ({module})"
  if opcode in elemental_generator.INDEX_OPCODES:
    return CODEGEN, "core (element generator: loop kernel / fused)"
  if opcode in eie.SUPPORTED_OPCODES:
    return CODEGEN, "core (elemental_ir_emitter, loop kernel / fused)"
  reason = _REASONS.get(opcode)
  if reason is None:
    if hlo_opcode.is_elementwise(opcode):
      reason = "no elemental emitter for this elementwise op"
    elif hlo_opcode.has_property(opcode, hlo_opcode.COLLECTIVE):
      reason = "no emitter registered for this collective"
    else:
      reason = "no emitter registered"
  return UNIMPLEMENTED, reason


def table() -> list[tuple[str, str, str]]:
  """(opcode name, status, detail) for every opcode, sorted by name."""
  rows = []
  for op in sorted(HloOpcode, key=lambda o: o.value):
    status, detail = classify(op)
    rows.append((op.value, status, detail))
  return rows


def summary(rows) -> dict[str, int]:
  out = {CODEGEN: 0, THUNK: 0, UNIMPLEMENTED: 0}
  for _, status, _ in rows:
    out[status] += 1
  return out


def render(markdown: bool = False) -> str:
  rows = table()
  counts = summary(rows)
  lines = []
  if markdown:
    lines.append("| opcode | status | detail |")
    lines.append("|---|---|---|")
    for name, status, detail in rows:
      lines.append(f"| `{name}` | {status} | {detail} |")
    lines.append("")
  else:
    width = max(len(r[0]) for r in rows)
    for name, status, detail in rows:
      lines.append(f"{name:<{width}}  {status:<13}  {detail}")
  lines.append(", ".join(f"{k}: {v}" for k, v in counts.items()) +
               f" (of {len(rows)} opcodes)")
  return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--markdown", action="store_true",
                      help="print a Markdown table")
  args = parser.parse_args(argv)
  print(render(args.markdown))
  return 0


if __name__ == "__main__":
  sys.exit(main())
