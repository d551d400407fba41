"""Lowerings of ATen matrix products (`stablehlo.dot_general`)."""

from __future__ import annotations

from torch_bridge._src import helpers as h
from torch_bridge._src.registry import lowering


def _same_dtype(node):
  vals = [a.meta.get("val") for a in node.args if hasattr(a, "meta")]
  dtypes = {v.dtype for v in vals if v is not None}
  if len(dtypes) > 1:
    return f"mixed operand dtypes {sorted(map(str, dtypes))}"
  return None


@lowering("aten.mm.default", check=_same_dtype)
def mm(ctx, a, b):
  return h.dot_general(ctx.b, a, b, ctx.out, lhs_contract=[1],
                       rhs_contract=[0])


@lowering("aten.bmm.default", check=_same_dtype)
def bmm(ctx, a, b):
  return h.dot_general(ctx.b, a, b, ctx.out, lhs_batch=[0], rhs_batch=[0],
                       lhs_contract=[2], rhs_contract=[1])


def _addmm_check(node):
  for key in ("beta", "alpha"):
    v = node.kwargs.get(key, 1)
    if not isinstance(v, (int, float)):
      return f"{key}={v!r} is not a number"
  return _same_dtype(node)


@lowering("aten.addmm.default", check=_addmm_check)
def addmm(ctx, bias, a, b, *, beta=1, alpha=1):
  """beta * bias + alpha * (a @ b)."""
  bld, ty = ctx.b, ctx.out
  prod = h.dot_general(bld, a, b, ty, lhs_contract=[1], rhs_contract=[0])
  if alpha != 1:
    prod = bld.op("stablehlo.multiply", [prod, bld.constant(alpha, ty)], ty)
  if beta == 0:
    return prod
  bias = h.operand(bld, bias, ty)
  if beta != 1:
    bias = bld.op("stablehlo.multiply", [bias, bld.constant(beta, ty)], ty)
  return bld.op("stablehlo.add", [prod, bias], ty)
