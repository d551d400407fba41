"""Checks shared by several op families (regions, element kinds, windows)."""

from __future__ import annotations

from typing import Optional, Sequence

from stablehlo._src.ir import core
from stablehlo._src.ops import typeutil as tu

# --- element kinds (the "Type" column of the spec's input tables) -------------

_KIND_TESTS = {
    "bool": tu.is_bool,
    "int": tu.is_integer,
    "sint": tu.is_signed_integer,
    "uint": tu.is_unsigned_integer,
    "float": tu.is_float,
    "complex": tu.is_complex,
    "quant": tu.is_per_tensor,
    "qaxis": tu.is_quantized,
    "index": tu.is_index,
}


def elem_ok(e, kinds: str) -> bool:
  """`kinds` is e.g. "float|complex|quant"; "any" accepts every type."""
  if kinds == "any":
    return True
  return any(_KIND_TESTS[k](e) for k in kinds.split("|"))


def check_kinds(ctx, kinds: str, which: str = "all") -> None:
  """Schema check: operand (and result) tensors have element kinds allowed
  by the op's type table."""
  types = []
  if which in ("all", "operands"):
    types += [("operand", i, x) for i, x in enumerate(ctx.operand_types)]
  if which in ("all", "results"):
    types += [("result", i, x) for i, x in enumerate(ctx.result_types)]
  for what, i, ty in types:
    if not tu.is_tensor(ty):
      ctx.fail(ctx.short + "_schema",
               f"{what} #{i} must be a tensor, got {tu.fmt_type(ty)}")
    e = tu.element_type(ty)
    if not elem_ok(e, kinds):
      ctx.fail(ctx.short + "_schema",
               f"{what} #{i} element type {tu.fmt_elem(e)} is not one of "
               f"{kinds.replace('|', ', ')}")


def check_tensor(ctx, ty, what: str, kinds: str = "any", rank=None) -> None:
  if not tu.is_tensor(ty):
    ctx.fail(ctx.short + "_schema", f"{what} must be a tensor, got "
             f"{tu.fmt_type(ty)}")
  if not elem_ok(tu.element_type(ty), kinds):
    ctx.fail(ctx.short + "_schema",
             f"{what} element type {tu.fmt_elem(tu.element_type(ty))} is "
             f"not one of {kinds.replace('|', ', ')}")
  r = tu.rank_of(ty)
  if rank is not None and r is not None and r != rank:
    ctx.fail(ctx.short + "_schema",
             f"{what} must have rank {rank}, got {tu.fmt_type(ty)}")


def same_baseline(ctx, cid: str, types: Sequence, names: Sequence[str]):
  """Spec `baseline_type(x) = baseline_type(y) = ...`."""
  for ty, name in zip(types[1:], names[1:]):
    ctx.check(tu.types_compatible(types[0], ty, baseline=True), cid,
              lambda ty=ty, name=name: f"{names[0]} {tu.fmt_type(types[0])} "
              f"and {name} {tu.fmt_type(ty)} must have the same baseline type")


def same_type(ctx, cid: str, types: Sequence, names: Sequence[str]):
  """Spec `type(x) = type(y) = ...` (dynamic dims compatible)."""
  for ty, name in zip(types[1:], names[1:]):
    ctx.check(tu.types_compatible(types[0], ty), cid,
              lambda ty=ty, name=name: f"{names[0]} {tu.fmt_type(types[0])} "
              f"and {name} {tu.fmt_type(ty)} must have the same type")


def same_shape(ctx, cid: str, types: Sequence, names: Sequence[str]):
  for ty, name in zip(types[1:], names[1:]):
    ctx.check(tu.shapes_compatible(tu.shape_of(types[0]), tu.shape_of(ty)),
              cid, lambda ty=ty, name=name: f"{names[0]} shape "
              f"{tu.fmt_shape(tu.shape_of(types[0]))} and {name} shape "
              f"{tu.fmt_shape(tu.shape_of(ty))} must be equal")


def same_types(ctx, xs: Sequence, ys: Sequence, what: str) -> None:
  """Two type lists of the same length, pairwise compatible (outside the
  spec: the failure is the op's `_schema` check)."""
  ctx.check(len(xs) == len(ys) and all(
      tu.types_compatible(p, q) for p, q in zip(xs, ys)), ctx.short +
            "_schema", lambda: f"{what}: {tu.fmt_types(xs)} vs "
            f"{tu.fmt_types(ys)}")


def same_element_type(ctx, cid: str, types: Sequence, names: Sequence[str]):
  for ty, name in zip(types[1:], names[1:]):
    e0, e1 = tu.element_type(types[0]), tu.element_type(ty)
    ctx.check(e0 == e1, cid, lambda e1=e1, name=name:
              f"{names[0]} element type {tu.fmt_elem(e0)} and {name} element "
              f"type {tu.fmt_elem(e1)} must be equal")


def check_axes(ctx, cid: str, what: str, axes: Sequence[int],
               rank: Optional[int], lo: int = 0) -> None:
  """Spec `lo <= axes < rank` (rank None: unranked, passes)."""
  if rank is None:
    return
  bad = [x for x in axes if not lo <= x < rank]
  ctx.check(not bad, cid, lambda: f"{what} {list(axes)} out of range "
            f"[{lo}, {rank})")


def check_unique(ctx, cid: str, what: str, xs: Sequence[int]) -> None:
  ctx.check(tu.is_unique(xs), cid, lambda: f"{what} {list(xs)} must be unique")


def check_sorted(ctx, cid: str, what: str, xs: Sequence[int]) -> None:
  ctx.check(tu.is_sorted(xs), cid, lambda: f"{what} {list(xs)} must be sorted")


# --- regions --------------------------------------------------------------------

RETURN_OPS = ("stablehlo.return", "func.return")


def region_signature(region: core.Region):
  """(argument types, returned types) of a single-block region."""
  if not region.blocks:
    return (), ()
  block = region.blocks[0]
  args = tuple(v.type for v in block.arguments)
  term = block.terminator
  rets = tuple(v.type for v in term.operands) if (
      term is not None and term.name in RETURN_OPS) else None
  return args, rets


def check_region(ctx, cid: str, index: int, what: str,
                 args: Optional[Sequence] = None,
                 rets: Optional[Sequence] = None, *,
                 baseline: bool = False):
  """The region `index` of the op has argument / return types compatible
  with `args` / `rets` (None: not checked). Returns its signature."""
  if index >= len(ctx.op.regions):
    ctx.fail(cid, f"{what} region is missing")
  got_args, got_rets = region_signature(ctx.op.regions[index])

  def same(xs, ys):
    return len(xs) == len(ys) and all(
        tu.types_compatible(x, y, baseline=baseline) for x, y in zip(xs, ys))

  if args is not None:
    ctx.check(same(got_args, args), cid, lambda: f"{what} takes "
              f"{tu.fmt_types(got_args)}, expected {tu.fmt_types(args)}")
  if rets is not None:
    ctx.check(got_rets is not None, cid,
              f"{what} must end in a return op")
    ctx.check(same(got_rets, rets), cid, lambda: f"{what} returns "
              f"{tu.fmt_types(got_rets)}, expected {tu.fmt_types(rets)}")
  return got_args, got_rets


def check_reducer(ctx, cid: str, index: int, what: str,
                  input_elems: Sequence) -> list:
  """A reduction body `(tensor<E0>.., tensor<E0>..) -> (tensor<E0>..)` with
  each input element type promotable to its Ei. Returns the Ei."""
  n = len(input_elems)
  if index >= len(ctx.op.regions):
    ctx.fail(cid, f"{what} region is missing")
  args, rets = region_signature(ctx.op.regions[index])
  ctx.check(len(args) == 2 * n, cid, lambda: f"{what} must take {2 * n} "
            f"arguments, takes {tu.fmt_types(args)}")
  ctx.check(rets is not None and len(rets) == n, cid,
            lambda: f"{what} must return {n} values, returns "
            f"{tu.fmt_types(rets or ())}")
  es = []
  for i in range(n):
    for ty, kind in ((args[i], "argument"), (args[n + i], "argument"),
                     (rets[i], "result")):
      ctx.check(tu.is_tensor(ty) and tu.rank_of(ty) in (0, None), cid,
                lambda ty=ty, kind=kind: f"{what} {kind} {tu.fmt_type(ty)} "
                "must be a 0-dimensional tensor")
    e = tu.element_type(args[i])
    ctx.check(tu.element_type(args[n + i]) == e and
              tu.element_type(rets[i]) == e, cid,
              lambda i=i: f"{what} has type {tu.fmt_types(args)} -> "
              f"{tu.fmt_types(rets)}: value #{i} must use one element type")
    ctx.check(tu.is_promotable(input_elems[i], e), cid,
              lambda i=i, e=e: f"{what} element type {tu.fmt_elem(e)} is not "
              f"a promotion of the input element type "
              f"{tu.fmt_elem(input_elems[i])}")
    es.append(e)
  return es


# --- windows ----------------------------------------------------------------------


def num_windows(size, window, stride, pad_lo=0, pad_hi=0, base_dilation=1,
                window_dilation=1):
  """Windows along one axis (spec formula shared by reduce_window,
  select_and_scatter and convolution); None if `size` is dynamic."""
  if size is None or window is None:
    return None
  dilated = 0 if size == 0 else (size - 1) * base_dilation + 1
  padded = pad_lo + dilated + pad_hi
  dwin = 0 if window == 0 else (window - 1) * window_dilation + 1
  if padded <= 0 or dwin > padded:
    return 0
  return (padded - dwin) // stride + 1


def const_ints(value) -> Optional[tuple]:
  """The integer contents of `value` if a `stablehlo.constant` defines it
  (lets dynamic ops check what is static after all), else None."""
  owner = getattr(value, "owner", None)
  if not isinstance(owner, core.Operation) or owner.name not in (
      "stablehlo.constant", "arith.constant"):
    return None
  v = owner.attr("value")
  try:
    return tu.ints(v)
  except (TypeError, ValueError):
    return None
