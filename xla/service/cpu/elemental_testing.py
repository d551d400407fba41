"""Test support for the elemental emitters: elementwise HLO instructions
turned into loop kernels (kernel ABI), many per LLVM module, JIT'ed once and
run through ctypes on numpy arrays.

    batch = KernelBatch()
    h = batch.add_elementwise("ROOT r = f32[] exponential(f32[] p0)")
    batch.compile()
    out = batch.run(h, x)
"""

from __future__ import annotations

import ctypes
from typing import Callable, Sequence

from llvmlite import ir
import numpy as np

from xla import primitive_util
from xla.hlo.parser import hlo_parser
from xla.service.cpu import elemental_ir_emitter as eie
from xla.service.cpu import elemental_util as u
from xla.service.cpu import jit
from xla.service.cpu import kernel_api

KERNEL_CFUNC = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.c_int64, ctypes.c_int64)


def parse_instruction(op_text: str, operand_types: Sequence[str],
                      result_type: str, n: int = 8):
  """The root instruction of `ENTRY { p_i = T_i[n] parameter(i); ROOT r =
  R[n] op_text }` where op_text is e.g. "add(p0, p1)"."""
  lines = [f"  p{i} = {t}[{n}] parameter({i})"
           for i, t in enumerate(operand_types)]
  lines.append(f"  ROOT r = {result_type}[{n}] {op_text}")
  text = "HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n}\n"
  module = hlo_parser.parse_and_return_unverified_module(text)
  return module, module.entry_computation.root_instruction


def emit_loop_kernel(ctx: kernel_api.KernelContext, name: str,
                     operand_types, result_type,
                     body: Callable[[ir.IRBuilder, list], ir.Value],
                     width: int = 1) -> str:
  """A kernel computing out[i] = body(in_0[i], ...) for i in [begin, end):
  a `width`-lane vector loop followed by a scalar remainder loop."""
  fn, b = ctx.new_kernel(name)
  begin, end = fn.args[1], fn.args[2]
  ins = [ctx.arg_pointer(b, fn, i, t) for i, t in enumerate(operand_types)]
  out = ctx.arg_pointer(b, fn, len(operand_types), result_type)

  def loop(start, stop, step, w):
    pre = b.block
    head = b.append_basic_block("head")
    body_bb = b.append_basic_block("body")
    exit_bb = b.append_basic_block("exit")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(u.I64)
    i.add_incoming(start, pre)
    nxt = b.add(i, ir.Constant(u.I64, step))
    b.cbranch(b.icmp_signed("<=", nxt, stop) if step > 1 else
              b.icmp_signed("<", i, stop), body_bb, exit_bb)
    b.position_at_end(body_bb)
    vals = [eie.load_element(b, b.gep(p, [i]), t, w)
            for p, t in zip(ins, operand_types)]
    eie.store_element(b, body(b, vals), b.gep(out, [i]), result_type)
    i.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(exit_bb)
    return i

  i = begin
  if width > 1:
    i = loop(begin, end, width, width)
  loop(i, end, 1, 1)
  b.ret_void()
  return fn.name


class KernelBatch:
  """Kernels gathered into one module, compiled together, run by handle."""

  def __init__(self, opt_level: int = 3):
    self.opt_level = opt_level
    self.module = ir.Module(name="elemental_test")
    jit.configure_module(self.module)
    self.ctx = kernel_api.KernelContext(self.module, jit.host_target_info())
    self._kernels = {}
    self._jit = None
    self.llvm_module = None

  def add_elementwise(self, op_text: str, operand_types: Sequence[str],
                      result_type: str, width: int = 1) -> str:
    """Adds a loop kernel for one elementwise op (HLO text of the op, e.g.
    "divide(p0, p1)"); returns its handle."""
    _, instr = parse_instruction(op_text, operand_types, result_type)
    ots = [o.shape.element_type for o in instr.operands]

    def body(b, vals):
      return eie.emit_elementwise(b, instr, vals)

    name = emit_loop_kernel(self.ctx, f"k_{len(self._kernels)}", ots,
                            instr.shape.element_type, body, width)
    self._kernels[name] = (ots, instr.shape.element_type)
    return name

  def add_loop(self, name, operand_types, result_type, body,
               width: int = 1) -> str:
    name = emit_loop_kernel(self.ctx, name, operand_types, result_type, body,
                            width)
    self._kernels[name] = (operand_types, result_type)
    return name

  def compile(self, extra_fn_attrs: dict[str, str] | None = None):
    """JITs the module; `extra_fn_attrs` maps a function name to LLVM
    attribute text (e.g. '"prefer-vector-width"="512"') that llvmlite's
    attribute set does not accept."""
    text = str(self.module)
    for name, attrs in (extra_fn_attrs or {}).items():
      head = f'define void @"{name}"('
      start = text.index(head)
      close = text.index(")", start)
      text = text[:close + 1] + " " + attrs + text[close + 1:]
    self._jit = jit.CpuJit(self.opt_level)
    self.llvm_module = self._jit.compile(text)
    return self

  def address(self, name: str) -> int:
    return self._jit.address(name)

  def run(self, name: str, *arrays) -> np.ndarray:
    ots, rt = self._kernels[name]
    arrays = [np.ascontiguousarray(
        np.asarray(a).astype(primitive_util.numpy_dtype(t), copy=False))
              for a, t in zip(arrays, ots)]
    n = arrays[0].size if arrays else 0
    out = np.zeros(n, primitive_util.numpy_dtype(rt))
    ptrs = (ctypes.c_void_p * (len(arrays) + 1))(
        *[a.ctypes.data for a in arrays], out.ctypes.data)
    KERNEL_CFUNC(self._jit.address(name))(ptrs, 0, n)
    return out
