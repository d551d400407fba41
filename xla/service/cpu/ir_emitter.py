"""Kernel emission for one HLO instruction (the core's dispatch).

`emit_instruction(ctx, instr)` returns the kernels (usually one) that
compute `instr`, run in order. The core handles fusions, reduce,
dynamic-update-slice, the ids and every instruction the element generator
can produce; any other opcode goes to the emitter registered for it with
`kernel_api.register_kernel_emitter` (dot / convolution, sort, gather,
scatter, windows, rng, linear algebra, ...). `EMITTERS` maps each such
opcode to its module, imported on first use.
"""

from __future__ import annotations

import importlib
import threading
from typing import Optional

from llvmlite import ir

import support
from xla import primitive_util
from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import elemental_ir_emitter as eie
from xla.service.cpu import fusion_emitter
from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter as le
from xla.service.cpu import loop_kernels
from xla.service.cpu.elemental_generator import ElementGenerator
from xla.service.cpu.elemental_generator import generatable
from xla.service.cpu.loop_emitter import Index

O = HloOpcode

# The one table of the emitters outside the core: opcode -> the module that
# registers its emitter (`kernel_api.register_kernel_emitter`) when
# imported. A compile imports only the modules its program needs: importing
# every module on the first compile cost ~60-80 ms (rng_emitter alone loads
# the StableHLO interpreter). A new emitter module adds its opcodes here;
# ir_emitter_test checks that each module registers exactly the opcodes
# listed for it.
EMITTERS: dict[str, str] = {}
for _module, _opcodes in (
    ("dot_emitter", ("dot",)),
    ("conv_emitter", ("convolution",)),
    ("sort_emitter", ("sort", "topk")),
    ("gather_scatter_emitter", ("gather", "scatter")),
    ("window_emitter", ("reduce-window", "select-and-scatter")),
    ("rng_emitter", ("rng-bit-generator",)),
    ("linalg_emitter", ("cholesky", "triangular-solve")),
    ("fft_emitter", ("fft",)),
    ("collective_emitter", ("all-reduce", "all-gather", "reduce-scatter",
                            "all-to-all", "collective-broadcast",
                            "collective-permute")),
):
  for _opcode in _opcodes:
    EMITTERS[_opcode] = f"xla.service.cpu.{_module}"
del _module, _opcodes, _opcode

# Custom calls that can run as native kernels: target prefix -> the module
# whose `emit(ctx, instr)` returns a KernelSpec, or None to leave the call to
# its Python handler (the custom-call thunk).
CUSTOM_CALL_EMITTERS: dict[str, str] = {
    "lapack_": "xla.service.cpu.lapack_emitter",
}

_LOAD_LOCK = threading.Lock()


def emitter_modules() -> list[str]:
  """The emitter modules of `EMITTERS` and `CUSTOM_CALL_EMITTERS`, each once,
  in table order."""
  return list(dict.fromkeys([*EMITTERS.values(),
                             *CUSTOM_CALL_EMITTERS.values()]))


def _import(name: str) -> None:
  """Imports one emitter module. A module that fails to import is a bug in
  it (a SyntaxError, a missing dependency), reported as such, not as an
  unimplemented opcode."""
  with _LOAD_LOCK:
    try:
      importlib.import_module(name)
    except Exception as e:  # pylint: disable=broad-except
      raise support.InternalError(
          f"CPU backend: emitter module {name} failed to import: "
          f"{type(e).__name__}: {e}") from e


def emitter_for(opcode_name: str):
  """The kernel emitter for `opcode_name` (importing its module on first
  use); None for an opcode no emitter module handles."""
  emitter = kernel_api.kernel_emitter(opcode_name)
  if emitter is not None:
    return emitter
  module = EMITTERS.get(opcode_name)
  if module is None:
    return None
  _import(module)
  emitter = kernel_api.kernel_emitter(opcode_name)
  if emitter is None:
    raise support.InternalError(
        f"CPU backend: {module} registers no emitter for {opcode_name}, "
        "although ir_emitter.EMITTERS names it")
  return emitter


def load_emitter_modules() -> None:
  """Imports every emitter module (tools that list coverage; the disk cache,
  whose kernels may call symbols these modules register)."""
  for name in emitter_modules():
    _import(name)


# Opcodes the core emits itself (besides generatable ones).
CORE_KERNEL_OPCODES = frozenset({
    O.kFusion, O.kReduce, O.kDynamicUpdateSlice, O.kPartitionId,
    O.kReplicaId, O.kGetDimensionSize,
})


def unimplemented(instr, why: str = "") -> support.UnimplementedError:
  msg = f"CPU backend: opcode {instr.opcode.value} is not implemented"
  if why:
    msg += f" ({why})"
  return support.UnimplementedError(msg + f" [{instr.name}]")


def emit_custom_call(ctx: kernel_api.KernelContext,
                     instr) -> Optional[list[kernel_api.KernelSpec]]:
  """The native kernels of custom call `instr`; None when its target has no
  native emitter (or the emitter leaves this call to the Python handler)."""
  target = instr.custom_call_target or ""
  for prefix, module in CUSTOM_CALL_EMITTERS.items():
    if target.startswith(prefix):
      _import(module)
      spec = importlib.import_module(module).emit(ctx, instr)
      return None if spec is None else [spec]
  return None


def emit_instruction(ctx: kernel_api.KernelContext,
                     instr) -> list[kernel_api.KernelSpec]:
  """The kernels computing `instr` (see the module docstring)."""
  op = instr.opcode
  if op == O.kFusion:
    if instr.fusion_kind in (FusionKind.kLoop, FusionKind.kInput):
      return fusion_emitter.emit_fusion(ctx, instr)
    emitter = kernel_api.kernel_emitter("fusion")
    if emitter is None:
      raise unimplemented(instr, f"fusion kind {instr.fusion_kind.value}")
    return [emitter(ctx, instr)]
  if op == O.kReduce:
    return fusion_emitter.emit_reduce(ctx, instr)
  if op == O.kDynamicUpdateSlice:
    return [emit_dynamic_update_slice(ctx, instr)]
  if op in (O.kPartitionId, O.kReplicaId):
    return [_emit_constant_scalar(ctx, instr, 0)]
  if op == O.kGetDimensionSize:
    dim = instr.dimensions[0]
    return [_emit_constant_scalar(ctx, instr,
                                  instr.operand(0).shape.dimensions[dim])]
  emitter = emitter_for(op.value)
  if emitter is not None:
    return [emitter(ctx, instr)]
  if generatable(instr) and not instr.shape.is_tuple():
    return fusion_emitter.emit_elemental(ctx, instr)
  raise unimplemented(instr)


def _emit_constant_scalar(ctx, instr, value: int) -> kernel_api.KernelSpec:
  args = loop_kernels.KernelArgs.for_instruction(ctx, instr)
  b = args.b
  ty = eie.compute_type(instr.shape.element_type)
  eie.store_element(b, ir.Constant(ty, value), args.results[0],
                    instr.shape.element_type)
  b.ret_void()
  return kernel_api.KernelSpec(args.name, 1, 1)


def emit_dynamic_update_slice(ctx, instr) -> kernel_api.KernelSpec:
  """out = operand 0 (copied unless it is the same buffer: the in-place
  case), then the update written at the clamped start indices."""
  args = loop_kernels.KernelArgs.for_instruction(ctx, instr)
  b = args.b
  op, upd = instr.operand(0), instr.operand(1)
  et = instr.shape.element_type
  out = args.results[0]
  src = args.operands[0]
  nbytes = primitive_util.byte_width(et) * _count(op.shape)
  if nbytes:
    same = b.icmp_unsigned("==", b.bitcast(out, le.I8_PTR),
                           b.bitcast(src, le.I8_PTR))
    with b.if_then(b.not_(same)):
      fn = b.module.declare_intrinsic("llvm.memmove",
                                      [le.I8_PTR, le.I8_PTR, le.I64])
      b.call(fn, [b.bitcast(out, le.I8_PTR), b.bitcast(src, le.I8_PTR),
                  le.i64(nbytes), ir.Constant(le.I1, 0)])
  sources = {id(upd): (args.operands[1], upd.shape)}
  for k in range(2, instr.operand_count):
    sources.setdefault(id(instr.operand(k)),
                       (args.operands[k], instr.operand(k).shape))
  gen = ElementGenerator(ctx, b, sources)
  udims = tuple(upd.shape.dimensions)
  odims = tuple(op.shape.dimensions)
  if _count(upd.shape):
    starts = gen.start_indices(instr, 2, odims, udims)
    with le.loop_nest(b, udims, "u") as uidx:
      with gen.scope():
        v = gen.value(upd, Index(udims, uidx))
        dst = Index(odims, [b.add(s, i) for s, i in zip(starts, uidx)])
        eie.store_element(b, v, le.element_ptr(b, out, dst), et)
  b.ret_void()
  return kernel_api.KernelSpec(args.name, 1, _count(upd.shape))


def _count(shape) -> int:
  n = 1
  for d in shape.dimensions:
    n *= d
  return n

