"""`fft` on the CPU backend through numpy's pocketfft, where the generated
kernel would be slow.

XLA's CPU backend runs FFTs with a library (DUCC, pocketfft's successor)
rather than generated code. We do the same with numpy.fft, the pocketfft
that numpy already bundles: `FftToHostCall` rewrites each `fft`
instruction into a custom call to `TARGET`, and `HANDLERS` holds the
handler that the executable's custom-call thunk runs on numpy views of the
operand and result. O(n log n) per line instead of the O(n^2) direct DFT of
fft_emitter.py for lengths that are not powers of two. Transforms whose
every axis is a power of two or short (`native_lengths`) stay with the
generated kernel (radix-2 there), which runs without Python; so does every
fft when this pass is disabled (`disable_passes=("fft-to-host-call",)`).

Semantics (as HLO's): the transform runs over the trailing
len(fft_length) dimensions; IFFT and IRFFT scale by 1/n; RFFT keeps
n/2 + 1 entries of the last axis; IRFFT produces fft_length[-1] of them.
Single precision stays single (numpy >= 2 transforms complex64 natively);
the result is stored in the result's element type either way.
"""

from __future__ import annotations

import json

import numpy as np

import support
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi

TARGET = "__xla_cpu_fft"

_NUMPY = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn,
          "IRFFT": np.fft.irfftn}


# Lines up to this length are cheap as the generated kernel's direct DFT.
NATIVE_DFT_MAX = 16


def native_lengths(lengths) -> bool:
  """Whether the generated kernel (fft_emitter) is the better path for an
  fft of `lengths`: every axis is a power of two (its radix-2 FFT) or
  short. It then runs without the host call's Python and copies."""
  lengths = [int(n) for n in lengths]
  return bool(lengths) and all(
      n <= NATIVE_DFT_MAX or n & (n - 1) == 0 for n in lengths)


def _fft_type_name(instr) -> str:
  value = instr.attr("fft_type")
  return getattr(value, "name", str(value)).upper()


class FftToHostCall(hpi.HloComputationPass):
  """Rewrites `fft` into a custom call run by `HANDLERS[TARGET]`."""

  @property
  def name(self) -> str:
    return "fft-to-host-call"

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for instr in list(comp.instructions):
      if instr.opcode != HloOpcode.kFft or instr.parent is not comp:
        continue
      if native_lengths(instr.attr("fft_length")):
        continue
      config = json.dumps({"fft_type": _fft_type_name(instr),
                           "fft_length": [int(n) for n in
                                          instr.attr("fft_length")]})
      call = comp.add_instruction(hi.create_custom_call(
          instr.shape, list(instr.operands), TARGET))
      call.backend_config = config
      call.metadata = instr.metadata
      comp.replace_instruction(instr, call)
      changed = True
    return changed


def _fft(instr, operands):
  """The handler: `operands[0]` is a numpy view of the fft operand."""
  try:
    config = json.loads(instr.backend_config)
    kind, lengths = config["fft_type"], tuple(config["fft_length"])
    fn = _NUMPY[kind]
  except (ValueError, KeyError, TypeError) as e:
    raise support.InvalidArgumentError(
        f"{TARGET}: bad backend_config {instr.backend_config!r} "
        f"({instr.name})") from e
  x = operands[0]
  axes = tuple(range(x.ndim - len(lengths), x.ndim))
  if not lengths or any(n == 0 for n in lengths) or x.size == 0:
    return None  # an empty transform: zeros (the thunk's "nothing")
  if kind in ("RFFT", "IRFFT"):
    return fn(x, s=lengths, axes=axes)
  return fn(x, axes=axes)


HANDLERS = {TARGET: _fft}
