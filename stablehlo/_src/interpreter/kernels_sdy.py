"""Shardy (sdy) ops in the interpreter, which runs a program's global
(unpartitioned) form on one device.

There, a sharding only says where the pieces of a value would live, so the
annotation ops are identities (`sharding_constraint`, `reshard`,
`propagation_barrier`, the data-flow edges), a sharding group records
nothing, and a named computation runs its body like a call. Ops whose
meaning is per device (`manual_computation`, the collectives) need the
partitioned program and are left out, with the reason recorded.
"""

from __future__ import annotations

from stablehlo._src.ops import registry


@registry.interpreter_kernel(
    "sdy.sharding_constraint", "sdy.reshard", "sdy.propagation_barrier",
    "sdy.data_flow_edge", "sdy.func_data_flow_edge")
def _identity(ctx, op, args):
  """The operand: on one device a sharding moves nothing."""
  return list(args)


@registry.interpreter_kernel("sdy.sharding_group")
def _sharding_group(ctx, op, args):
  """A propagation hint; no result."""
  return []


@registry.interpreter_kernel("sdy.named_computation")
def _named_computation(ctx, op, args):
  """Its body on the operands (as if inlined)."""
  return list(ctx.run_region(op.regions[0], list(args)))


_PER_DEVICE = ("a per-device op: run the partitioned program (it needs a "
               "device id and the other devices' data)")
_NOT_KERNELS = {
    "sdy.mesh": "declaration: read by the shardings that name it",
    "sdy.return": "terminator: handled by the dispatch loop",
    "sdy.manual_computation": _PER_DEVICE,
    "sdy.all_gather": _PER_DEVICE,
    "sdy.all_slice": _PER_DEVICE,
    "sdy.all_to_all": _PER_DEVICE,
    "sdy.all_reduce": _PER_DEVICE,
    "sdy.reduce_scatter": _PER_DEVICE,
    "sdy.collective_permute": _PER_DEVICE,
    "sdy.constant": "internal to sharding propagation; JAX does not emit it",
}
for _name, _reason in _NOT_KERNELS.items():
  registry.mark_unsupported(_name, "interpreter", _reason)
