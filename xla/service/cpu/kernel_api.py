"""The contract between the CPU backend's thunk runtime and its kernel emitters.

Every compiled HLO operation that runs as machine code is one LLVM function
with the *kernel ABI*:

    void kernel(i8** args, i64 begin, i64 end)

`args` holds one base pointer per array: first the operands' arrays in operand
order (a tuple-shaped operand contributes its leaves, depth first), then the
result's arrays (the leaves of the instruction's shape, depth first). Arrays
are dense, in the layout their shape carries (the CPU pipeline assigns the
default major-to-minor layout, so an emitter may assume row-major order unless
it says otherwise), with no padding and at least 64-byte alignment for
buffers the runtime allocates (parameters passed in by the caller are only
element-aligned).

`[begin, end)` is the part of the kernel's *parallel extent* this call must
do. An emitter chooses the extent (for a loop nest, usually the size of the
outer dimension, or a number of row blocks); the runtime splits it across
worker threads and calls the kernel once per part, with the GIL released.
An extent of 1 means "not parallel": the runtime calls (0, 1) once. Parts
never overlap, so a kernel must write only the output elements that belong to
its part (an emitter whose writes cannot be split returns extent 1).

Emitters are registered per HLO opcode name with `register_kernel_emitter`
and called with a `KernelContext`; they add one function (and any helpers) to
`ctx.module` and return a `KernelSpec`. An emitter that cannot handle an
instruction (an element type, an attribute) raises `support.UnimplementedError`
naming the opcode and what is missing; it never emits a wrong kernel.
External symbols a kernel calls (a BLAS routine, say) are made known to the
JIT with `register_symbol` before the module is compiled.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Optional

from llvmlite import ir

import support
from xla import xla_data
from xla.shape import Shape

PrimitiveType = xla_data.PrimitiveType

I8_PTR = ir.IntType(8).as_pointer()
I64 = ir.IntType(64)
KERNEL_FN_TYPE = ir.FunctionType(ir.VoidType(), [I8_PTR.as_pointer(), I64, I64])

# Element type -> LLVM storage type. PRED is stored as one byte holding 0 or 1.
# Sub-byte types (S4/U4) are stored one per byte, as numpy/ml_dtypes hold them.
_LLVM_TYPES: dict[PrimitiveType, Callable[[], ir.Type]] = {
    PrimitiveType.PRED: lambda: ir.IntType(8),
    PrimitiveType.S2: lambda: ir.IntType(8),
    PrimitiveType.S4: lambda: ir.IntType(8),
    PrimitiveType.S8: lambda: ir.IntType(8),
    PrimitiveType.S16: lambda: ir.IntType(16),
    PrimitiveType.S32: lambda: ir.IntType(32),
    PrimitiveType.S64: lambda: ir.IntType(64),
    PrimitiveType.U2: lambda: ir.IntType(8),
    PrimitiveType.U4: lambda: ir.IntType(8),
    PrimitiveType.U8: lambda: ir.IntType(8),
    PrimitiveType.U16: lambda: ir.IntType(16),
    PrimitiveType.U32: lambda: ir.IntType(32),
    PrimitiveType.U64: lambda: ir.IntType(64),
    PrimitiveType.F16: ir.HalfType,
    PrimitiveType.BF16: lambda: ir.IntType(16),  # converted through f32
    PrimitiveType.F32: ir.FloatType,
    PrimitiveType.F64: ir.DoubleType,
    PrimitiveType.C64: lambda: ir.LiteralStructType(
        [ir.FloatType(), ir.FloatType()]),
    PrimitiveType.C128: lambda: ir.LiteralStructType(
        [ir.DoubleType(), ir.DoubleType()]),
}


def llvm_storage_type(element_type: PrimitiveType) -> ir.Type:
  """The LLVM type one element of `element_type` is stored as in memory."""
  make = _LLVM_TYPES.get(PrimitiveType(element_type))
  if make is None:
    raise support.UnimplementedError(
        f"CPU codegen: element type {PrimitiveType(element_type).name} has no "
        "LLVM storage type")
  return make()


def array_leaves(shape: Shape) -> list[Shape]:
  """The array leaves of `shape`, depth first (a non-tuple is its own leaf)."""
  if shape.is_tuple():
    out: list[Shape] = []
    for s in shape.tuple_shapes:
      out.extend(array_leaves(s))
    return out
  return [shape]


@dataclasses.dataclass(frozen=True)
class KernelSpec:
  """What an emitter produced: the kernel's symbol and its parallel extent."""
  name: str
  parallel_extent: int = 1
  # Rough cost in element-operations for the whole kernel, used by the
  # runtime to decide whether splitting the extent across threads pays.
  cost: int = 0


@dataclasses.dataclass
class TargetInfo:
  """What emitters may assume about the host."""
  cpu_name: str = ""
  features: str = ""
  vector_bits: int = 256  # widest native vector register to aim loops at

  def vector_width(self, element_bits: int) -> int:
    return max(1, self.vector_bits // element_bits)


class KernelContext:
  """Given to every emitter: the LLVM module to add to and shared services."""

  def __init__(self, module: ir.Module, target: Optional[TargetInfo] = None):
    self.module = module
    self.target = target or TargetInfo()
    self._names: dict[str, int] = {}
    self._scalar_fns: dict[int, ir.Function] = {}
    # Internal globals holding constant arrays, one per HLO constant:
    # id(instr) -> (pointer, instr); keeping instr alive keeps its id unique.
    self.constant_globals: dict[int, tuple[ir.Value, object]] = {}

  def unique_name(self, base: str) -> str:
    """A symbol name not yet used in this module, derived from `base`.
    (Distinct bases can clean to the same name, and a numbered name can
    equal another base: "fusion.multi.1" twice and "fusion.multi.1.1".)"""
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in base)
    n = self._names.get(clean, 0)
    name = clean if n == 0 else f"{clean}_{n}"
    while name in self._names or name in self.module.globals:
      n += 1
      name = f"{clean}_{n}"
    self._names[clean] = n + 1
    if name != clean:
      self._names[name] = 1
    return name

  def new_kernel(self, base: str) -> tuple[ir.Function, ir.IRBuilder]:
    """Declares a kernel-ABI function and returns it with a builder at its
    entry block. The caller finishes it (one `ret_void` on every path)."""
    fn = ir.Function(self.module, KERNEL_FN_TYPE, self.unique_name(base))
    fn.args[0].name, fn.args[1].name, fn.args[2].name = "args", "begin", "end"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    return fn, builder

  @staticmethod
  def arg_pointer(builder: ir.IRBuilder, fn: ir.Function, index: int,
                  element_type: PrimitiveType) -> ir.Value:
    """args[index] of a kernel, cast to a pointer to its element type."""
    slot = builder.gep(fn.args[0], [ir.Constant(I64, index)])
    raw = builder.load(slot)
    return builder.bitcast(raw, llvm_storage_type(element_type).as_pointer())

  def scalar_computation(self, computation) -> ir.Function:
    """An LLVM function for a scalar HLO computation (a reducer, comparator,
    map body, scatter combiner), built once per computation:
    `void f(T0* p0, ..., Tn* pn, R0* out0, ...)`; see
    `elemental_ir_emitter.emit_scalar_computation`."""
    key = id(computation)
    fn = self._scalar_fns.get(key)
    if fn is None:
      if _scalar_computation_emitter is None:
        raise support.InternalError(
            "no scalar-computation emitter is installed: import "
            "xla.service.cpu.elemental_ir_emitter before emitting kernels")
      fn = _scalar_computation_emitter(
          self.module, computation, self.unique_name(
              f"scalar_{computation.name}"))
      self._scalar_fns[key] = fn
    return fn


# `emit(module, computation, name) -> ir.Function` for scalar computations.
# elemental_ir_emitter, which builds on this module, installs it when it is
# imported (this module is the leaf both depend on).
_scalar_computation_emitter: Optional[Callable] = None


def set_scalar_computation_emitter(emit: Callable) -> None:
  global _scalar_computation_emitter
  _scalar_computation_emitter = emit


KernelEmitter = Callable[[KernelContext, "object"], KernelSpec]

_EMITTERS: dict[str, KernelEmitter] = {}
_SYMBOLS: dict[str, int] = {}
_LOCK = threading.Lock()


def register_kernel_emitter(opcode_name: str):
  """Decorator: `fn(ctx, instr) -> KernelSpec` emits kernels for `opcode_name`
  (the HLO text name, e.g. "dot", "sort"). One emitter per opcode."""

  def deco(fn: KernelEmitter) -> KernelEmitter:
    with _LOCK:
      if opcode_name in _EMITTERS and _EMITTERS[opcode_name] is not fn:
        raise support.AlreadyExistsError(
            f"a kernel emitter for {opcode_name!r} is already registered")
      _EMITTERS[opcode_name] = fn
    return fn

  return deco


def kernel_emitter(opcode_name: str) -> Optional[KernelEmitter]:
  return _EMITTERS.get(opcode_name)


def registered_opcodes() -> list[str]:
  return sorted(_EMITTERS)


def register_symbol(name: str, address: int) -> None:
  """Makes an external function at `address` callable from kernels by `name`."""
  from llvmlite import binding  # pylint: disable=g-import-not-at-top
  with _LOCK:
    if _SYMBOLS.get(name) == address:
      return
    binding.add_symbol(name, address)
    _SYMBOLS[name] = address
