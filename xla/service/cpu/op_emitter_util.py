"""Small llvmlite helpers shared by the CPU backend's non-elementwise kernel
emitters (sort, gather / scatter, windows, random bits, linear algebra).

Loops are `loop_emitter.for_range` / `loop_nest` in their test-first form
(`for_range` / `loop_nest` here fix those options). `KernelArgs` loads a kernel's array pointers and
knows each leaf's shape, so emitters index arrays with `element_ptr`.
Per-call scratch memory comes from `Scratch`: a stack slot when small, else
`malloc`/`free` (libc symbols the JIT resolves in-process).
"""

from __future__ import annotations

import math
from typing import Sequence

from llvmlite import ir

import support
from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8_PTR = I8.as_pointer()

# Largest scratch buffer taken from the stack; bigger ones are malloc'ed.
MAX_STACK_SCRATCH_BYTES = 64 * 1024


def i64(v: int) -> ir.Constant:
  return ir.Constant(I64, int(v))


def row_major_strides(dims: Sequence[int]) -> list[int]:
  strides = [1] * len(dims)
  for d in range(len(dims) - 2, -1, -1):
    strides[d] = strides[d + 1] * dims[d + 1]
  return strides


def check_row_major(shape, opcode: str) -> None:
  """Raises UnimplementedError unless `shape` (every array leaf) has the
  default major-to-minor layout the emitters index with."""
  for leaf in kernel_api.array_leaves(shape):
    lay = leaf.layout
    if lay is None or not lay.minor_to_major:
      continue
    if tuple(lay.minor_to_major) != tuple(range(len(leaf.dimensions) - 1,
                                                -1, -1)):
      raise support.UnimplementedError(
          f"CPU codegen for {opcode}: only the default row-major layout is "
          f"supported, got {leaf}")


def byte_size(element_type) -> int:
  """Bytes one element occupies in a kernel argument array."""
  ty = kernel_api.llvm_storage_type(element_type)
  if isinstance(ty, ir.IntType):
    return max(1, ty.width // 8)
  if isinstance(ty, ir.HalfType):
    return 2
  if isinstance(ty, ir.FloatType):
    return 4
  if isinstance(ty, ir.DoubleType):
    return 8
  return 2 * (4 if isinstance(ty.elements[0], ir.FloatType) else 8)


def for_range(b: ir.IRBuilder, start, stop, name: str = "i",
              step: int = 1):
  """`loop_emitter.for_range` in the form these emitters use: test-first,
  no `nsw` on the increment. A context manager yielding i (i64)."""
  return loop_emitter.for_range(b, start, stop, name, step, test_first=True,
                                nsw=False)


def loop_nest(b: ir.IRBuilder, sizes: Sequence[int], name: str = "d"):
  """`loop_emitter.loop_nest` over static `sizes` with this module's
  `for_range` form; yields the list of indices (size-1 dims: constant 0)."""
  return loop_emitter.loop_nest(b, sizes, name, test_first=True, nsw=False)


def linear_index(b: ir.IRBuilder, idx: Sequence, strides: Sequence[int]):
  """sum(idx[k] * strides[k]) as i64 (idx entries: i64 values or ints)."""
  acc = None
  const = 0
  for v, s in zip(idx, strides):
    if isinstance(v, ir.Constant):
      v = int(v.constant)
    if isinstance(v, int):
      const += v * s
      continue
    if s == 0:
      continue
    term = v if s == 1 else b.mul(v, i64(s))
    acc = term if acc is None else b.add(acc, term)
  if acc is None:
    return i64(const)
  return acc if const == 0 else b.add(acc, i64(const))


def delinearize(b: ir.IRBuilder, lin, dims: Sequence[int]) -> list:
  """The row-major multi-index of linear index `lin` in `dims`."""
  out = []
  strides = row_major_strides(dims)
  for d, (n, s) in enumerate(zip(dims, strides)):
    if n == 1:
      out.append(i64(0))
      continue
    q = lin if s == 1 else b.udiv(lin, i64(s))
    if d > 0:
      q = b.urem(q, i64(n))
    out.append(q)
  return out


def entry_alloca(b: ir.IRBuilder, ty: ir.Type, count: int = 1,
                 name: str = "") -> ir.Value:
  """An alloca in the function's entry block (so loops do not grow the
  stack): before its terminator once it has one (`KernelArgs` ends the entry
  block with a branch at once), else at the builder when it is still in the
  entry block, else at the block's start."""
  entry = b.function.entry_basic_block
  if entry.is_terminated:
    eb = ir.IRBuilder(entry)
    eb.position_before(entry.terminator)
  elif b.block is entry:
    eb = b
  else:
    eb = ir.IRBuilder(entry)
    if entry.instructions:
      eb.position_before(entry.instructions[0])
  if count == 1:
    return eb.alloca(ty, name=name)
  return eb.alloca(ty, size=i64(count), name=name)


def to_i64_index(b: ir.IRBuilder, v: ir.Value, signed: bool) -> ir.Value:
  """An index value of any integer width as i64. Unsigned 64-bit indices
  saturate at 2^62 so huge values stay large and positive."""
  w = v.type.width
  if w < 64:
    return b.sext(v, I64) if signed else b.zext(v, I64)
  if not signed:
    cap = i64(1 << 62)
    return b.select(b.icmp_unsigned(">", v, cap), cap, v)
  return v


def clamp(b: ir.IRBuilder, v, lo: int, hi: int):
  """min(max(v, lo), hi) on signed i64."""
  v = b.select(b.icmp_signed("<", v, i64(lo)), i64(lo), v)
  return b.select(b.icmp_signed(">", v, i64(hi)), i64(hi), v)


def memcpy(b: ir.IRBuilder, dst, src, nbytes) -> None:
  fn = b.module.declare_intrinsic("llvm.memcpy", [I8_PTR, I8_PTR, I64])
  nbytes = i64(nbytes) if isinstance(nbytes, int) else nbytes
  b.call(fn, [b.bitcast(dst, I8_PTR), b.bitcast(src, I8_PTR), nbytes,
              ir.Constant(I1, 0)])


def memmove(b: ir.IRBuilder, dst, src, nbytes) -> None:
  fn = b.module.declare_intrinsic("llvm.memmove", [I8_PTR, I8_PTR, I64])
  nbytes = i64(nbytes) if isinstance(nbytes, int) else nbytes
  b.call(fn, [b.bitcast(dst, I8_PTR), b.bitcast(src, I8_PTR), nbytes,
              ir.Constant(I1, 0)])


def _libc(module: ir.Module, name: str, fnty: ir.FunctionType):
  fn = module.globals.get(name)
  if fn is None:
    fn = ir.Function(module, fnty, name)
  return fn


def malloc(b: ir.IRBuilder, nbytes, name: str = "") -> ir.Value:
  """libc malloc(nbytes) (an i64 value or a Python int), as an i8*."""
  fn = _libc(b.module, "malloc", ir.FunctionType(I8_PTR, [I64]))
  return b.call(fn, [i64(nbytes) if isinstance(nbytes, int) else nbytes],
                name=name)


def free(b: ir.IRBuilder, ptr: ir.Value) -> None:
  """libc free(ptr) of any pointer."""
  fn = _libc(b.module, "free", ir.FunctionType(ir.VoidType(), [I8_PTR]))
  b.call(fn, [b.bitcast(ptr, I8_PTR)])


class Scratch:
  """A per-call scratch buffer of `nbytes` (a static size): on the stack up
  to MAX_STACK_SCRATCH_BYTES, else from malloc; `release()` frees it (call
  it once on the path that returns)."""

  def __init__(self, b: ir.IRBuilder, nbytes: int, name: str = "scratch"):
    self.nbytes = max(16, int(nbytes))
    self.heap = self.nbytes > MAX_STACK_SCRATCH_BYTES
    if self.heap:
      self.ptr = malloc(b, self.nbytes, name=name)
    else:
      # i64 slots keep the buffer 8-byte aligned; align 16 for complex.
      slot = entry_alloca(b, ir.ArrayType(I64, (self.nbytes + 7) // 8),
                          name=name)
      slot.align = 16
      self.ptr = b.bitcast(slot, I8_PTR)

  def at(self, b: ir.IRBuilder, byte_offset: int, ty: ir.Type) -> ir.Value:
    """A pointer of type ty* at `byte_offset` into the buffer."""
    p = self.ptr if byte_offset == 0 else b.gep(self.ptr, [i64(byte_offset)])
    return b.bitcast(p, ty.as_pointer())

  def release(self, b: ir.IRBuilder) -> None:
    if self.heap:
      free(b, self.ptr)


class KernelArgs:
  """The array pointers of a kernel (operand leaves, then result leaves),
  each cast to its storage type, with the shapes they hold."""

  def __init__(self, ctx: kernel_api.KernelContext, instr, base: str,
               optsize: bool = False):
    self.fn, self.b = ctx.new_kernel(base)
    if optsize:
      # For branchy, comparison-bound loops: O3 would fully unroll their
      # static trip counts (10x the code and compile time for no speed).
      self.fn.attributes.add("optsize")
    self.begin, self.end = self.fn.args[1], self.fn.args[2]
    self.operand_shapes = []
    for op in instr.operands:
      self.operand_shapes.extend(kernel_api.array_leaves(op.shape))
    self.result_shapes = kernel_api.array_leaves(instr.shape)
    for s in self.operand_shapes + self.result_shapes:
      check_row_major(s, instr.opcode.value)
    self.operands = [self._ptr(i, s) for i, s in
                     enumerate(self.operand_shapes)]
    n = len(self.operand_shapes)
    self.results = [self._ptr(n + i, s) for i, s in
                    enumerate(self.result_shapes)]
    # The entry block keeps only the pointer loads and allocas.
    body = self.fn.append_basic_block("body")
    self.b.branch(body)
    self.b.position_at_end(body)

  def _ptr(self, index: int, shape) -> ir.Value:
    return kernel_api.KernelContext.arg_pointer(self.b, self.fn, index,
                                                shape.element_type)


def element_ptr(b: ir.IRBuilder, base: ir.Value, lin) -> ir.Value:
  """&base[lin] (lin an i64 value or a Python int)."""
  if isinstance(lin, int):
    lin = i64(lin)
  if isinstance(lin, ir.Constant) and lin.constant == 0:
    return base
  return b.gep(base, [lin])


def copy_array(b: ir.IRBuilder, dst, src, count: int, element_type) -> None:
  """dst[0:count] = src[0:count] unless both are the same buffer."""
  if count == 0:
    return
  same = b.icmp_unsigned("==", b.bitcast(dst, I8_PTR), b.bitcast(src,
                                                                 I8_PTR))
  with b.if_then(b.not_(same)):
    memmove(b, dst, src, count * byte_size(element_type))


def num_elements(shape) -> int:
  return math.prod(shape.dimensions)
