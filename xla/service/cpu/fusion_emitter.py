"""Kernels for fusions and for standalone elemental instructions.

A fusion's kernel reads the fusion operands (its fused parameters) from
memory and generates everything else element by element
(`ElementGenerator`):

* loop fusion: one loop over the output shape (`loop_kernels`); a
  multi-output loop fusion computes every output at an index before storing
  any, so an output may share storage with an operand read at the same
  index (in-place updates of loop-carried values). Concatenates the loop
  generates split it at their pieces where they can (`concat_split`).
* reduction fusion (root `reduce`, or a tuple holding reduces): the
  reduction kernel of `reduction_emitter`. Reduces over the same input and
  dimensions share one sweep, which also stores the elementwise outputs of
  that shape; other outputs get kernels of their own (a fusion may then
  have several kernels, run one after the other).

A standalone instruction that the generator handles (elementwise ops,
broadcast, transpose, slice, pad, concatenate, iota, map, ...) is emitted
as a one-instruction loop fusion whose sources are its operands.

Emission that runs out of Python stack or memory (a fusion nested too
deeply, or too large for the host) raises `support.ResourceExhaustedError`
naming the instruction, never a bare RecursionError, MemoryError or the
SystemError CPython raises when a frame cannot be allocated.
"""

from __future__ import annotations

import functools
import math

import support
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import concat_split
from xla.service.cpu import elemental_ir_emitter as eie
from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter as le
from xla.service.cpu import loop_kernels
from xla.service.cpu import transpose_kernels
from xla.service.cpu import reduction_emitter as re_
from xla.service.cpu.elemental_generator import ElementGenerator
from xla.service.cpu.loop_emitter import Index

O = HloOpcode

# Opcodes whose generator only needs the linear index of its own element
# when its operands have its shape (or are scalars).
_LINEAR_FRIENDLY = frozenset({O.kParameter, O.kConstant, O.kCopy,
                              O.kReshape, O.kBitcast, O.kMap}) | (
                                  eie.SUPPORTED_OPCODES)
_EXPENSIVE = frozenset({
    O.kExp, O.kExpm1, O.kLog, O.kLog1p, O.kTanh, O.kLogistic, O.kErf,
    O.kSin, O.kCos, O.kTan, O.kAtan2, O.kPower, O.kCbrt, O.kDivide,
    O.kRemainder, O.kSqrt, O.kRsqrt, O.kMap,
})


def _size_of(instr) -> str:
  comp = getattr(instr, "fused_computation", None) if (
      instr.opcode == O.kFusion) else None
  if comp is None:
    return ""
  return f" ({len(list(comp.instructions))} fused instructions)"


def _guarded(emit):
  """Reports stack or memory exhaustion while emitting `instr` as a
  ResourceExhaustedError naming it (see the module docstring)."""

  @functools.wraps(emit)
  def wrapper(ctx, instr):
    what = f"{instr.opcode.value} {instr.name}{_size_of(instr)}"
    try:
      return emit(ctx, instr)
    except RecursionError:
      raise support.ResourceExhaustedError(
          f"CPU backend: emitting {what} exceeded the Python recursion "
          "limit (a chain of index-changing instructions too deep to "
          "generate element by element)") from None
    except MemoryError as e:
      if isinstance(e, support.XlaError):
        raise
      raise support.ResourceExhaustedError(
          f"CPU backend: out of memory while emitting {what}") from None
    except SystemError as e:
      # CPython 3.11 reports a frame it could not allocate (memory
      # exhausted) as "error return without exception set".
      raise support.ResourceExhaustedError(
          f"CPU backend: the interpreter failed while emitting {what} "
          f"(out of memory or stack): {e}") from None

  return wrapper


def _linear_ok(instrs, dims) -> bool:
  for i in instrs:
    if i.opcode == O.kBroadcast:
      if i.operand(0).shape.dimensions:
        return False
      continue
    if i.opcode not in _LINEAR_FRIENDLY:
      return False
    if i.opcode in (O.kReshape, O.kBitcast):
      continue
    for o in i.operands:
      if o.shape.dimensions and tuple(o.shape.dimensions) != tuple(dims):
        return False
  return True


def _reads_transposed(instrs, dims) -> bool:
  """Whether the loop over `dims` reads some operand along a dimension
  other than its contiguous one (a transpose moving the last dimension),
  with both tiled dimensions large enough for tiling to matter."""
  if len(dims) < 2 or min(dims[-2:]) < 2 * loop_kernels.TILE:
    return False
  for i in instrs:
    if i.opcode == O.kTranspose:
      perm = i.dimensions
      if perm and perm[-1] != len(perm) - 1:
        return True
  return False


def _reachable(roots) -> list:
  seen, out, stack = set(), [], list(roots)
  while stack:
    x = stack.pop()
    if id(x) in seen:
      continue
    seen.add(id(x))
    out.append(x)
    stack.extend(x.operands)
  return out


def _cost(instrs, n: int) -> int:
  w = sum(20 if i.opcode in _EXPENSIVE else 1 for i in instrs
          if i.opcode != O.kParameter)
  return n * max(1, w)


def _loop_kernel(ctx, args, gen, outputs, dims, sources_instrs=()):
  """Finishes `args`' kernel as a loop over `dims` storing each
  (instruction, pointer) of `outputs`."""
  b = args.b
  if len(outputs) == 1:
    instr, ptr = outputs[0]
    src = (gen.source_pointer(instr.operand(0))
           if instr.opcode == O.kTranspose else None)
    if transpose_kernels.block_transposable(instr, src):
      spec = transpose_kernels.emit(args, instr, src, ptr)
      loop_kernels.annotate_noalias(args)
      return spec
  instrs = _reachable([o for o, _ in outputs])
  linear = _linear_ok([i for i in instrs if not gen.is_source(i)], dims)

  def body(index: Index):
    with gen.scope():
      vals = [gen.value(instr, index) for instr, _ in outputs]
      for v, (instr, ptr) in zip(vals, outputs):
        eie.store_element(b, v, le.element_ptr(b, ptr, index),
                          instr.shape.element_type)

  split = concat_split.plan([o for o, _ in outputs], dims, gen.is_source)
  splitter = None if split is None else concat_split.Splitter(split, gen)
  if _reads_transposed(instrs, dims):
    extent = loop_kernels.emit_tiled_loop(b, args.begin, args.end, dims,
                                          body, split=splitter)
  else:
    extent = loop_kernels.emit_elementwise_loop(
        b, args.begin, args.end, dims, linear, body, "loop", splitter)
  b.ret_void()
  loop_kernels.annotate_noalias(args)
  return kernel_api.KernelSpec(args.name, extent,
                               _cost(instrs, math.prod(dims)))


def _fusion_args(ctx, instr, suffix=""):
  args = loop_kernels.KernelArgs.for_instruction(ctx, instr,
                                                 instr.name + suffix)
  comp = instr.fused_computation
  sources = {}
  for p in comp.parameter_instructions:
    n = p.parameter_number
    if instr.operand(n).shape.is_tuple():
      raise support.UnimplementedError(
          f"CPU backend: fusion {instr.name} has a tuple-shaped operand")
    sources[id(p)] = (args.operands[n], p.shape)
  return args, ElementGenerator(ctx, args.b, sources)


@_guarded
def emit_fusion(ctx: kernel_api.KernelContext,
                instr) -> list[kernel_api.KernelSpec]:
  """Kernels for a kLoop / kInput fusion (see the module docstring)."""
  comp = instr.fused_computation
  root = comp.root_instruction
  if root.opcode == O.kTuple:
    elems = list(root.operands)
  else:
    elems = [root]
  reduces = [k for k, e in enumerate(elems) if e.opcode == O.kReduce]
  if not reduces:
    # Loop fusion; outputs grouped by their dimensions.
    by_dims: dict[tuple, list[int]] = {}
    for k, e in enumerate(elems):
      by_dims.setdefault(tuple(e.shape.dimensions), []).append(k)
    specs = []
    for g, (dims, ks) in enumerate(by_dims.items()):
      args, gen = _fusion_args(ctx, instr, "" if g == 0 else f"_{g}")
      leaf = _leaf_offsets(elems)
      outputs = [(elems[k], args.results[leaf[k]]) for k in ks]
      specs.append(_loop_kernel(ctx, args, gen, outputs, dims))
    return specs
  return _emit_reduction_fusion(ctx, instr, elems, reduces)


def _leaf_offsets(elems) -> list[int]:
  out, n = [], 0
  for e in elems:
    out.append(n)
    n += len(kernel_api.array_leaves(e.shape))
  return out


def _emit_reduction_fusion(ctx, instr, elems, reduces):
  leaf = _leaf_offsets(elems)
  groups: dict[tuple, list[int]] = {}
  for k in reduces:
    groups.setdefault(re_.group_key(elems[k]), []).append(k)
  others = [k for k in range(len(elems)) if k not in reduces]
  specs = []
  for g, (key, ks) in enumerate(groups.items()):
    args, gen = _fusion_args(ctx, instr, "" if g == 0 else f"_{g}")
    outs = []
    for k in ks:
      n = len(kernel_api.array_leaves(elems[k].shape))
      outs.append(re_.ReduceOutput(elems[k],
                                   args.results[leaf[k]:leaf[k] + n]))
    input_dims = key[0]
    extras = []
    for k in list(others):
      if tuple(elems[k].shape.dimensions) == input_dims:
        extras.append((elems[k], args.results[leaf[k]]))
        others.remove(k)
    specs.append(re_.emit_group(ctx, args, gen,
                                re_.ReductionGroup(outs, extras)))
  if others:
    by_dims: dict[tuple, list[int]] = {}
    for k in others:
      by_dims.setdefault(tuple(elems[k].shape.dimensions), []).append(k)
    for g, (dims, ks) in enumerate(by_dims.items()):
      args, gen = _fusion_args(ctx, instr, f"_loop{g}")
      outputs = [(elems[k], args.results[leaf[k]]) for k in ks]
      specs.append(_loop_kernel(ctx, args, gen, outputs, dims))
  return specs


def _standalone_args(ctx, instr):
  args = loop_kernels.KernelArgs.for_instruction(ctx, instr)
  sources = {}
  k = 0
  for o in instr.operands:
    if o.shape.is_tuple():
      raise support.UnimplementedError(
          f"CPU backend: {instr.opcode.value} {instr.name} has a "
          "tuple-shaped operand")
    if id(o) not in sources:
      sources[id(o)] = (args.operands[k], o.shape)
    k += 1
  return args, ElementGenerator(ctx, args.b, sources)


@_guarded
def emit_elemental(ctx: kernel_api.KernelContext,
                   instr) -> list[kernel_api.KernelSpec]:
  """A loop kernel computing a standalone generatable instruction."""
  args, gen = _standalone_args(ctx, instr)
  return [_loop_kernel(ctx, args, gen, [(instr, args.results[0])],
                       tuple(instr.shape.dimensions))]


@_guarded
def emit_reduce(ctx: kernel_api.KernelContext,
                instr) -> list[kernel_api.KernelSpec]:
  """The reduction kernel of a standalone (possibly variadic) reduce."""
  args, gen = _standalone_args(ctx, instr)
  group = re_.ReductionGroup([re_.ReduceOutput(instr, list(args.results))],
                             [])
  return [re_.emit_group(ctx, args, gen, group)]
