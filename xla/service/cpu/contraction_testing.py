"""Test helpers for single-instruction kernels (dot / convolution tests and
the bench): emit the root instruction of an HLO text module with its
registered emitter, JIT it, and call it through ctypes on numpy arrays."""

from __future__ import annotations

import ctypes
from typing import Sequence

from llvmlite import ir
import numpy as np

from xla import primitive_util
from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.ir import hlo_opcode
from xla.hlo.parser import hlo_parser
from xla.service.cpu import conv_emitter  # pylint: disable=unused-import
from xla.service.cpu import dot_emitter  # pylint: disable=unused-import
from xla.service.cpu import jit as cpu_jit
from xla.service.cpu import kernel_api

_KERNEL_T = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p),
                             ctypes.c_int64, ctypes.c_int64)


class Kernel:
  """A compiled single-instruction kernel and what it was built from."""

  def __init__(self, text: str):
    self.module = hlo_parser.parse_and_return_unverified_module(text)
    self.instr = self.module.entry_computation.root_instruction
    llmod = ir.Module(name="test")
    cpu_jit.configure_module(llmod)
    ctx = kernel_api.KernelContext(llmod, cpu_jit.host_target_info())
    emitter = kernel_api.kernel_emitter(
        hlo_opcode.opcode_string(self.instr.opcode))
    self.spec = emitter(ctx, self.instr)
    self.ir_text = str(llmod)
    self.jit = cpu_jit.CpuJit()
    self.jit.compile(llmod)
    self.fn = _KERNEL_T(self.jit.address(self.spec.name))

  def out_dtype(self):
    return primitive_util.numpy_dtype(self.instr.shape.element_type)

  def __call__(self, *args: np.ndarray,
               parts: Sequence[tuple[int, int]] | None = None) -> np.ndarray:
    """Runs the kernel on `args`; `parts` are the [begin, end) calls to make
    (default: the whole extent at once). Returns the output array."""
    shape = self.instr.shape
    out = np.full(tuple(shape.dimensions), _poison(self.out_dtype()),
                  self.out_dtype())
    arrays = [np.ascontiguousarray(a) for a in args] + [out]
    ptrs = (ctypes.c_void_p * len(arrays))(
        *[a.ctypes.data if a.size else 0 for a in arrays])
    if parts is None:
      parts = [(0, self.spec.parallel_extent)]
    for begin, end in parts:
      self.fn(ptrs, begin, end)
    return out

  def prepare(self, *args: np.ndarray):
    """A no-argument callable running the whole extent on `args` into a
    fixed output array (for timing without per-call Python set-up)."""
    out = np.empty(tuple(self.instr.shape.dimensions), self.out_dtype())
    arrays = [np.ascontiguousarray(a) for a in args] + [out]
    ptrs = (ctypes.c_void_p * len(arrays))(
        *[a.ctypes.data if a.size else 0 for a in arrays])
    fn, extent = self.fn, self.spec.parallel_extent

    def run():
      fn(ptrs, 0, extent)
      return arrays[-1]

    run.keep_alive = arrays
    return run

  def run_split(self, *args: np.ndarray) -> np.ndarray:
    """Runs the extent in two parts (the second may be empty)."""
    e = self.spec.parallel_extent
    h = e // 2
    return self(*args, parts=[(h, e), (0, h)])


def _poison(dtype):
  if dtype.kind in "fc":
    return np.nan
  if dtype.kind == "b":
    return True
  return 123


def evaluate(text: str, *args: np.ndarray) -> np.ndarray:
  module = hlo_parser.parse_and_return_unverified_module(text)
  return hlo_evaluator.HloEvaluator().evaluate(module, list(args))[0]


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return rng.random(shape) < 0.5
  if dtype.kind in "iu" or dtype.name in ("int4", "uint4", "int2", "uint2"):
    info_lo, info_hi = {"int4": (-8, 8), "uint4": (0, 16), "int2": (-2, 2),
                        "uint2": (0, 4)}.get(dtype.name, (None, None))
    if info_lo is None:
      ii = np.iinfo(dtype)
      info_lo, info_hi = max(ii.min, -100), min(ii.max, 100) + 1
    return rng.integers(info_lo, info_hi, size=shape).astype(dtype)
  if dtype.kind == "c":
    return (rng.standard_normal(shape) +
            1j * rng.standard_normal(shape)).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)
