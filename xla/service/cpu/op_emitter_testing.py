"""Test harness for single-instruction kernel emitters.

`run_instruction(hlo_text, args)` parses an HLO module, emits the kernel of
its entry root (or of the instruction named `name`) into a fresh
`KernelContext`, JITs it with `CpuJit` and calls it through ctypes on numpy
arrays: once over the whole parallel extent and, when the extent is above
1, again in two parts into fresh buffers; both runs must agree. Result
buffers start filled with a garbage byte pattern so unwritten elements
show. `evaluate(hlo_text, args)` is the HloEvaluator's answer.
"""

from __future__ import annotations

import ctypes
from typing import Optional, Sequence

from llvmlite import ir
import numpy as np

from xla import primitive_util
from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.parser import hlo_parser
from xla.service.cpu import jit
from xla.service.cpu import kernel_api

KERNEL_CFUNC = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.c_int64, ctypes.c_int64)

_JIT: Optional[jit.CpuJit] = None


def _jit() -> jit.CpuJit:
  global _JIT
  if _JIT is None:
    _JIT = jit.CpuJit()
  return _JIT


def parse(text: str):
  return hlo_parser.parse_and_return_unverified_module(text)


def find_instruction(module, name: Optional[str] = None):
  comp = module.entry_computation
  if name is None:
    return comp.root_instruction
  for instr in comp.instructions:
    if instr.name == name:
      return instr
  raise KeyError(name)


class CompiledKernel:
  """A JIT'ed kernel for one instruction plus what is needed to call it."""

  def __init__(self, instr, spec: kernel_api.KernelSpec, address: int,
               ir_text: str):
    self.instr = instr
    self.spec = spec
    self.fn = KERNEL_CFUNC(address)
    self.ir_text = ir_text
    self.result_shapes = kernel_api.array_leaves(instr.shape)

  def new_results(self) -> list[np.ndarray]:
    outs = []
    for s in self.result_shapes:
      dt = primitive_util.numpy_dtype(s.element_type)
      a = np.empty(tuple(s.dimensions), dt)
      a.reshape(-1).view(np.uint8)[...] = 0xA5
      outs.append(a)
    return outs

  def call(self, args: Sequence[np.ndarray], parts: Sequence[tuple[int, int]],
           results: Optional[list[np.ndarray]] = None) -> list[np.ndarray]:
    args = [np.ascontiguousarray(a) for a in args]
    outs = self.new_results() if results is None else results
    arrays = list(args) + outs
    ptrs = (ctypes.c_void_p * max(1, len(arrays)))(
        *[a.ctypes.data for a in arrays])
    for lo, hi in parts:
      self.fn(ptrs, lo, hi)
    return outs

  def run(self, args: Sequence[np.ndarray], check_split: bool = True
          ) -> list[np.ndarray]:
    extent = self.spec.parallel_extent
    whole = self.call(args, [(0, extent)])
    if check_split and extent > 1:
      mid = extent // 2
      split = self.call(args, [(mid, extent), (0, mid)])
      for w, s in zip(whole, split):
        np.testing.assert_array_equal(w.reshape(-1).view(np.uint8),
                                      s.reshape(-1).view(np.uint8))
    return whole


def compile_instruction(text: str, name: Optional[str] = None,
                        module=None) -> CompiledKernel:
  module = module or parse(text)
  instr = find_instruction(module, name)
  ctx = kernel_api.KernelContext(ir.Module(name="h4_test"),
                                 jit.host_target_info())
  jit.configure_module(ctx.module)
  emitter = kernel_api.kernel_emitter(instr.opcode.value)
  assert emitter is not None, f"no emitter for {instr.opcode.value}"
  spec = emitter(ctx, instr)
  text_ir = str(ctx.module)
  j = _jit()
  j.compile(text_ir)
  return CompiledKernel(instr, spec, j.address(spec.name), text_ir)


def run_instruction(text: str, args: Sequence[np.ndarray],
                    name: Optional[str] = None) -> list[np.ndarray]:
  """Compiles the instruction's kernel and runs it (see module docstring)."""
  return compile_instruction(text, name).run(args)


def evaluate(text: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
  return hlo_evaluator.HloEvaluator().evaluate(parse(text), list(args))


def assert_same(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                rtol: float = 0.0, atol: float = 0.0) -> None:
  assert len(got) == len(want)
  for g, w in zip(got, want):
    w = np.asarray(w)
    assert g.shape == w.shape, (g.shape, w.shape)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    if rtol or atol:
      np.testing.assert_allclose(g.astype(np.complex128 if g.dtype.kind ==
                                          "c" else np.float64),
                                 w.astype(np.complex128 if w.dtype.kind ==
                                          "c" else np.float64),
                                 rtol=rtol, atol=atol, equal_nan=True)
    elif g.dtype.kind == "f" or str(g.dtype) in ("bfloat16", "float16"):
      # Values equal, NaN where NaN (any payload), zeros of the same sign.
      g64, w64 = g.astype(np.float64), w.astype(np.float64)
      np.testing.assert_array_equal(g64, w64)
      ok = ~np.isnan(w64)
      np.testing.assert_array_equal(np.signbit(g64[ok]), np.signbit(w64[ok]))
    else:
      np.testing.assert_array_equal(g.reshape(-1).view(np.uint8),
                                    w.reshape(-1).view(np.uint8))


def fft_module(kind: str, in_ty: str, in_dims, out_ty: str, out_dims,
               length) -> str:
  """HLO text of one `fft` of `kind` (FFT, IFFT, RFFT, IRFFT)."""
  def dims(s):
    return ",".join(str(x) for x in s)
  return f"""HloModule m
ENTRY e {{
  x = {in_ty}[{dims(in_dims)}] parameter(0)
  ROOT f = {out_ty}[{dims(out_dims)}] fft(x), fft_type={kind}, fft_length={{{dims(length)}}}
}}"""


def complex_normal(rng: np.random.Generator, shape, dtype) -> np.ndarray:
  """Standard-normal real and imaginary parts, as `dtype`."""
  return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
          ).astype(dtype)
