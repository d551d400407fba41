"""Kernel emission for one HLO instruction (the core's dispatch).

`emit_instruction(ctx, instr)` returns the kernels (usually one) that
compute `instr`, run in order. The core handles fusions, reduce,
dynamic-update-slice, the ids and every instruction the element generator
can produce; any other opcode goes to the emitter registered for it with
`kernel_api.register_kernel_emitter` (dot / convolution, sort, gather,
scatter, windows, rng, linear algebra, ...). Those emitters live in modules
imported lazily here, so a missing module only makes its opcodes
unimplemented.
"""

from __future__ import annotations

import importlib
import os
import threading

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

# Modules of the other emitters; each registers its opcodes on import. Any
# other `*_emitter` module of this package is imported too (see
# `emitter_module_names`), so a new emitter needs no edit here.
EMITTER_MODULES = (
    "xla.service.cpu.dot_emitter",
    "xla.service.cpu.conv_emitter",
    "xla.service.cpu.sort_emitter",
    "xla.service.cpu.gather_scatter_emitter",
    "xla.service.cpu.window_emitter",
    "xla.service.cpu.rng_emitter",
    "xla.service.cpu.linalg_emitter",
    "xla.service.cpu.fft_emitter",
    "xla.service.cpu.collective_emitter",
)

# Emitter modules of the core and the elemental library (not registries).
_NOT_REGISTRIES = frozenset({
    "elemental_ir_emitter", "fusion_emitter", "reduction_emitter",
    "thunk_emitter", "ir_emitter", "loop_emitter",
})


def emitter_module_names() -> list[str]:
  names = list(EMITTER_MODULES)
  here = os.path.dirname(os.path.abspath(__file__))
  try:
    files = sorted(os.listdir(here))
  except OSError:
    files = []
  for f in files:
    base = f[:-3]
    if (f.endswith("_emitter.py") and base not in _NOT_REGISTRIES and
        f"xla.service.cpu.{base}" not in names):
      names.append(f"xla.service.cpu.{base}")
  return names


# The opcodes each emitter module registers: a hint that lets a compile
# import only the modules its program needs. Importing every module on the
# first compile that needs any cost ~60-80 ms (matmul's whole emission
# phase was 62 ms of it; rng_emitter alone loads the StableHLO
# interpreter). A missing or stale hint costs only time: an opcode without
# a registered emitter after its hinted module loads every module.
OPCODE_HINTS = {
    "xla.service.cpu.dot_emitter": ("dot",),
    "xla.service.cpu.conv_emitter": ("convolution",),
    "xla.service.cpu.sort_emitter": ("sort", "topk"),
    "xla.service.cpu.gather_scatter_emitter": ("gather", "scatter"),
    "xla.service.cpu.window_emitter": ("reduce-window",
                                       "select-and-scatter"),
    "xla.service.cpu.rng_emitter": ("rng-bit-generator",),
    "xla.service.cpu.linalg_emitter": ("cholesky", "triangular-solve"),
    "xla.service.cpu.fft_emitter": ("fft",),
    "xla.service.cpu.collective_emitter": (
        "all-reduce", "all-gather", "reduce-scatter", "all-to-all",
        "collective-broadcast", "collective-permute"),
}

_LOAD_LOCK = threading.Lock()
_LOAD_ERRORS: dict[str, str] = {}
_LOADED = False
_LOADED_MODULES: set[str] = set()


def _import(name: str) -> None:
  """Imports one emitter module (caller holds _LOAD_LOCK)."""
  if name in _LOADED_MODULES:
    return
  _LOADED_MODULES.add(name)
  try:
    importlib.import_module(name)
  except Exception as e:  # pylint: disable=broad-except
    _LOAD_ERRORS[name] = f"{type(e).__name__}: {e}"


def emitter_for(opcode_name: str):
  """The registered kernel emitter for `opcode_name`, importing the emitter
  module hinted for it first and every module only if that is not enough;
  None if no module registers one."""
  emitter = kernel_api.kernel_emitter(opcode_name)
  if emitter is not None:
    return emitter
  with _LOAD_LOCK:
    for module, opcodes in OPCODE_HINTS.items():
      if opcode_name in opcodes:
        _import(module)
  emitter = kernel_api.kernel_emitter(opcode_name)
  if emitter is None:
    load_emitter_modules()
    emitter = kernel_api.kernel_emitter(opcode_name)
  return emitter


def load_emitter_modules() -> dict[str, str]:
  """Imports the registered-emitter modules once; returns module -> error
  for those that failed to import."""
  global _LOADED
  with _LOAD_LOCK:
    if not _LOADED:
      for name in emitter_module_names():
        _import(name)
      _LOADED = True
  return dict(_LOAD_ERRORS)


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
    starts = gen._start_indices(instr, 2, odims, udims)  # pylint: disable=protected-access
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

