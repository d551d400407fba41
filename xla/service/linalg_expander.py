"""An HLO pass that expands JAX's linear-algebra custom calls into HLO.

JAX lowers geqrf, householder_product and eigh on platforms without LAPACK
or cuSOLVER kernels to the custom calls "Qr",
"ProductOfElementaryHouseholderReflectors" and "Eigh"; XLA replaces them
with plain HLO in its QrExpander and EighExpander passes. This pass does the
same for all three: each call becomes a `call` of a computation built (in
HLO text, see hlo_text_builder) by qr_expander / eigh_expander and parsed
into the module; one computation per (target, shapes, config) and module.

The HLO evaluator handles these targets by evaluating `expansion_module`
of the one instruction (xla/hlo/evaluator/hlo_evaluator.py), so the
evaluator and the CPU backend compute them with the same algorithm.
"""

from __future__ import annotations

from typing import Callable

import support
from xla import primitive_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.pass_ import hlo_pass_interface as hpi

# qr_expander and eigh_expander (and the HLO text builder behind them) are
# imported only when a module calls one of their targets: this pass runs on
# every CPU compile, and importing them was most of its cost on a process's
# first compile.


def _type_name(shape) -> str:
  et = shape.element_type
  if not (primitive_util.is_floating_point(et) or
          primitive_util.is_complex(et)):
    raise support.InvalidArgumentError(
        f"linear-algebra custom call: element type "
        f"{primitive_util.lowercase_name(et)} is not floating point or "
        f"complex")
  return primitive_util.lowercase_name(et)


def _backend_config(instr) -> str:
  cfg = getattr(instr, "backend_config", "") or ""
  if isinstance(cfg, bytes):
    cfg = cfg.decode("utf-8")
  return str(cfg)


def _check_matrix(instr, shape) -> None:
  if not shape.is_array() or shape.rank < 2:
    raise support.InvalidArgumentError(
        f"custom-call '{instr.custom_call_target}' ({instr.name}) needs an "
        f"operand of rank >= 2, got {shape.to_string()}")


def _qr_text(instr) -> str:
  from xla.service import qr_expander  # pylint: disable=g-import-not-at-top
  shape = instr.operand(0).shape
  _check_matrix(instr, shape)
  return qr_expander.build_qr("qr", _type_name(shape),
                              tuple(shape.dimensions))


def _householder_text(instr) -> str:
  from xla.service import qr_expander  # pylint: disable=g-import-not-at-top
  a = instr.operand(0).shape
  taus = instr.operand(1).shape
  _check_matrix(instr, a)
  k = taus.dimensions[-1] if taus.rank else 0
  if (tuple(taus.dimensions[:-1]) != tuple(a.dimensions[:-2]) or
      k > min(a.dimensions[-2:])):
    raise support.InvalidArgumentError(
        f"custom-call '{instr.custom_call_target}' ({instr.name}): taus "
        f"{taus.to_string()} do not fit a {a.to_string()}")
  return qr_expander.build_householder_product(
      "householder_product", _type_name(a), tuple(a.dimensions), k)


def _eigh_text(instr) -> str:
  from xla.service import eigh_expander  # pylint: disable=g-import-not-at-top
  shape = instr.operand(0).shape
  _check_matrix(instr, shape)
  cfg = eigh_expander.parse_config(_backend_config(instr), instr.name)
  return eigh_expander.build_eigh("eigh", _type_name(shape),
                                  tuple(shape.dimensions), cfg)


# Custom-call target (qr_expander.QR_TARGET, HOUSEHOLDER_PRODUCT_TARGET,
# eigh_expander.EIGH_TARGET) -> builder of the expansion's module text.
EXPANSIONS: dict[str, Callable] = {
    "Qr": _qr_text,
    "ProductOfElementaryHouseholderReflectors": _householder_text,
    "Eigh": _eigh_text,
}


def _key(instr) -> str:
  ops = ",".join(o.shape.to_string() for o in instr.operands)
  return f"{instr.custom_call_target}({ops})|{_backend_config(instr)}"


def expansion_module(instr):
  """The expansion of custom call `instr` as a fresh, verified HloModule."""
  from xla.hlo.parser import hlo_parser  # pylint: disable=g-import-not-at-top
  text = EXPANSIONS[instr.custom_call_target](instr)
  return hlo_parser.parse_and_return_verified_module(text)


class LinalgCustomCallExpander(hpi.HloModulePass):
  """Replaces "Qr", "ProductOfElementaryHouseholderReflectors" and "Eigh"
  custom calls by calls of their HLO expansions."""

  @property
  def name(self) -> str:
    return "linalg-custom-call-expander"

  def run(self, module, execution_threads=frozenset()) -> bool:
    cache: dict[str, object] = {}
    changed = False
    for comp in hpi.computations_to_run(module, execution_threads):
      for instr in list(comp.instructions):
        if (instr.opcode != hi.HloOpcode.kCustomCall or
            instr.custom_call_target not in EXPANSIONS):
          continue
        key = _key(instr)
        if key not in cache:
          cache[key] = self._import(module, expansion_module(instr))
        call = hi.create_call(instr.shape, instr.operands, cache[key])
        comp.replace_instruction(instr, comp.add_instruction(call))
        changed = True
    return changed

  @staticmethod
  def _import(module, expansion):
    """Moves the computations of `expansion` into `module`; returns the
    (former) entry computation."""
    entry = expansion.entry_computation
    for c in expansion.make_computation_post_order():
      c.parent = None
      if c is entry:
        c.name = f"{expansion.name}_expansion"
      module.add_embedded_computation(c)
    return entry
