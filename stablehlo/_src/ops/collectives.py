"""Distributed and communication ops: collectives, send / recv, infeed /
outfeed, tokens, process ids, async_start / async_done, and
interpreter.run_parallel (which runs a program on a grid of processes).

Constraints that need the number of replicas / partitions (known only when
the program runs) are checked by the interpreter, not here; the verifier
checks what the op alone determines (uniqueness, non-negative ids, shapes
derived from the group size, reduction bodies).
"""

from __future__ import annotations

import functools
import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu

_COLL = frozenset({r.COLLECTIVE})
_SIDE = frozenset({r.SIDE_EFFECT})


# This family's defaults for `registry.define_op`.
_define_op = functools.partial(r.define_op, results=("results*",), traits=_COLL)


def _groups(ctx, name="replica_groups"):
  """The replica groups as a 2-D int array, or None (absent / mesh axes)."""
  v = ctx.attr(name)
  if v is None or not isinstance(v, (a.DenseElementsAttr, a.ArrayAttr)):
    return None
  arr = tu.int_matrix(v)
  if arr.ndim == 1:
    arr = arr.reshape(1, -1) if arr.size else arr.reshape(0, 0)
  return arr


def _check_groups(ctx, groups, unique_cid, range_cid):
  if groups is None:
    return
  ids = [int(x) for x in groups.reshape(-1) if x >= 0]
  ctx.check(tu.is_unique(ids), unique_cid, lambda: f"replica_groups "
            f"{groups.tolist()} repeat an id")
  ctx.check(all(x >= -1 for x in groups.reshape(-1)), range_cid,
            lambda: f"replica_groups {groups.tolist()} contain a negative id")


def _group_size(groups):
  if groups is None or groups.ndim != 2 or groups.shape[1] == 0:
    return None
  return groups.shape[1]


def _exact_group_size(ctx, g):
  """The process-group size where the op alone determines it: in the
  cross_replica_and_partition mode (a channel id without global device ids)
  groups also span the partitions, whose count is known only at run time."""
  ch = _channel_id(ctx)
  if ch is not None and ch > 0 and not ctx.bool("use_global_device_ids"):
    return None
  return g


def _channel_id(ctx):
  h = ctx.attr("channel_handle")
  if h is None:
    return None
  return tu.Params(h).int("handle", 0)


def _channel_type(ctx):
  h = ctx.attr("channel_handle")
  return None if h is None else tu.Params(h).int("type", 0)


def _check_global_ids(ctx, cid):
  if ctx.bool("use_global_device_ids"):
    ch = _channel_id(ctx)
    ctx.check(ch is not None and ch > 0, cid, "use_global_device_ids needs a "
              f"positive channel id, got {ch}")


def _verify_all_gather(ctx):
  dim = ctx.int("all_gather_dim")
  groups = _groups(ctx)
  for x in ctx.operand_types:
    c.check_axes(ctx, "c1", "all_gather_dim", (dim,), tu.rank_of(x))
  _check_groups(ctx, groups, "c2", "c4")
  _check_global_ids(ctx, "c5")
  ins, outs = ctx.operand_types, ctx.result_types
  ctx.check(len(ins) == len(outs), "c6", f"{len(ins)} operands but "
            f"{len(outs)} results")
  g = _exact_group_size(ctx, _group_size(groups))
  for i, (x, y) in enumerate(zip(ins, outs)):
    ctx.check(tu.element_type(x) == tu.element_type(y), "c6",
              lambda i=i: f"operand #{i} and result #{i} element types differ")
    sx = tu.shape_of(x)
    if sx is None:
      continue
    want = list(sx)
    want[dim] = None if g is None or sx[dim] is None else sx[dim] * g
    ctx.check_result_shape(i, want, "c6", f"result #{i}")


_define_op("stablehlo.all_gather", _verify_all_gather,
           ("c1", "c2", "c4", "c5", "c6"), ("operands*",),
           attributes={"all_gather_dim": "i64",
                       "replica_groups": "dense<i64>",
                       "channel_handle?": "#stablehlo.channel_handle",
                       "use_global_device_ids?": "unit"})


def _verify_all_reduce(ctx):
  groups = _groups(ctx)
  _check_groups(ctx, groups, "c1", "c3")
  _check_global_ids(ctx, "c4")
  ins, outs = ctx.operand_types, ctx.result_types
  es = c.check_reducer(ctx, "c5", 0, "computation",
                       [tu.element_type(ins[0])] if ins else [])
  for i, x in enumerate(ins[1:]):
    ctx.check(tu.is_promotable(tu.element_type(x), es[0]), "c5",
              lambda x=x: f"operand element type "
              f"{tu.fmt_elem(tu.element_type(x))} does not promote to "
              f"{tu.fmt_elem(es[0])}")
  ctx.check(len(ins) == len(outs), "c6", f"{len(ins)} operands but "
            f"{len(outs)} results")
  for i, (x, y) in enumerate(zip(ins, outs)):
    ctx.check_result_shape(i, tu.shape_of(x), "c6", f"result #{i}")
    ctx.check(tu.element_type(y) == es[0], "c7", lambda y=y, i=i:
              f"result #{i} element type {tu.fmt_elem(tu.element_type(y))} "
              f"must be the computation's {tu.fmt_elem(es[0])}")


_define_op("stablehlo.all_reduce", _verify_all_reduce,
           ("c1", "c3", "c4", "c5", "c6", "c7"), ("operands*",),
           attributes={"replica_groups": "dense<i64>",
                       "channel_handle?": "#stablehlo.channel_handle",
                       "use_global_device_ids?": "unit"},
           regions=("computation",))


def _verify_all_to_all(ctx):
  sd, cd = ctx.int("split_dimension"), ctx.int("concat_dimension")
  n = ctx.int("split_count")
  groups = _groups(ctx)
  ctx.check(n > 0, "c4", f"split_count must be positive, got {n}")
  for i, x in enumerate(ctx.operand_types):
    rx = tu.rank_of(x)
    c.check_axes(ctx, "c1", "split_dimension", (sd,), rx)
    c.check_axes(ctx, "c3", "concat_dimension", (cd,), rx)
    sx = tu.shape_of(x)
    if sx is not None and sx[sd] is not None:
      ctx.check(sx[sd] % n == 0, "c2", f"operand #{i} split dim size "
                f"{sx[sd]} is not divisible by split_count {n}")
  _check_groups(ctx, groups, "c5", "c7")
  g = _group_size(groups)
  if g is not None:
    ctx.check(g == n, "c8", f"replica groups have {g} members, split_count "
              f"is {n}")
  ins, outs = ctx.operand_types, ctx.result_types
  ctx.check(len(ins) == len(outs), "c9", f"{len(ins)} operands but "
            f"{len(outs)} results")
  for i, (x, y) in enumerate(zip(ins, outs)):
    ctx.check(tu.element_type(x) == tu.element_type(y), "c9",
              lambda i=i: f"operand #{i} and result #{i} element types differ")
    sx = tu.shape_of(x)
    if sx is None:
      continue
    want = list(sx)
    if sd != cd:
      want[sd] = None if sx[sd] is None else sx[sd] // n
      want[cd] = None if sx[cd] is None else sx[cd] * n
    ctx.check_result_shape(i, want, "c9", f"result #{i}")


_define_op("stablehlo.all_to_all", _verify_all_to_all,
           ("c1", "c2", "c3", "c4", "c5", "c7", "c8", "c9"), ("operands*",),
           attributes={"split_dimension": "i64", "concat_dimension": "i64",
                       "split_count": "i64", "replica_groups": "dense<i64>",
                       "channel_handle?": "#stablehlo.channel_handle"})


def _verify_reduce_scatter(ctx):
  x = ctx.operand_types[0]
  y = ctx.result_types[0]
  sd = ctx.int("scatter_dimension")
  groups = _groups(ctx)
  g = _exact_group_size(ctx, _group_size(groups))
  sx = tu.shape_of(x)
  c.check_axes(ctx, "c2", "scatter_dimension", (sd,), tu.rank_of(x))
  if sx is not None and g is not None and sx[sd] is not None:
    ctx.check(sx[sd] % g == 0, "c1", f"scatter dim size {sx[sd]} is not "
              f"divisible by the group size {g}")
  _check_groups(ctx, groups, "c3", "c5")
  _check_global_ids(ctx, "c6")
  es = c.check_reducer(ctx, "c7", 0, "computation", [tu.element_type(x)])
  if sx is not None:
    want = list(sx)
    want[sd] = None if g is None or sx[sd] is None else sx[sd] // g
    ctx.check_result_shape(0, want, "c8")
  ctx.check(tu.element_type(y) == es[0], "c9", lambda: "result element type "
            f"{tu.fmt_elem(tu.element_type(y))} must be the computation's "
            f"{tu.fmt_elem(es[0])}")


_define_op("stablehlo.reduce_scatter", _verify_reduce_scatter,
           ("c1", "c2", "c3", "c5", "c6", "c7", "c8", "c9"), ("operand",),
           results=("result",),
           attributes={"scatter_dimension": "i64",
                       "replica_groups": "dense<i64>",
                       "channel_handle?": "#stablehlo.channel_handle",
                       "use_global_device_ids?": "unit"},
           regions=("computation",))


def _verify_collective_broadcast(ctx):
  groups = _groups(ctx)
  _check_groups(ctx, groups, "c1", "c2")
  ins, outs = ctx.operand_types, ctx.result_types
  dyn = ctx.bool("has_dynamic_root")
  if not dyn:
    ctx.check(len(ins) >= 1, "c3", "needs at least one operand")
    ctx.check(len(outs) == len(ins) and all(
        tu.types_compatible(p, q) for p, q in zip(ins, outs)), "c3",
              lambda: f"result types {tu.fmt_types(outs)} must equal operand "
              f"types {tu.fmt_types(ins)}")
  else:
    ctx.check(len(ins) >= 2, "c4", "a dynamic root needs at least two "
              "operands")
    root = ins[-1]
    ctx.check(tu.is_tensor(root) and tu.element_type(root) == t.i32 and
              tu.shapes_compatible(tu.shape_of(root), (len(ins) - 1,)), "c4",
              lambda: f"root operand {tu.fmt_type(root)} must be "
              f"tensor<{len(ins) - 1}xi32>")
    ctx.check(all(tu.types_compatible(p, q) for p, q in zip(ins[:-1], outs)),
              "c4", lambda: f"result types {tu.fmt_types(outs)} must equal "
              f"operand types {tu.fmt_types(ins[:-1])}")
  want = len(ins) - (1 if dyn else 0)
  ctx.check(len(outs) == want, "c5", f"expects {want} results, got "
            f"{len(outs)}")


_define_op("stablehlo.collective_broadcast", _verify_collective_broadcast,
           ("c1", "c2", "c3", "c4", "c5"), ("operands*",),
           attributes={"replica_groups": "dense<i64>",
                       "channel_handle?": "#stablehlo.channel_handle",
                       "has_dynamic_root?": "bool"})


def _check_pairs(ctx, ids=("c1", "c2", "c3", "c4")):
  v = ctx.attr("source_target_pairs")
  if v is None:
    return
  p = tu.int_matrix(v)
  if p.size == 0:
    return
  ctx.check(p.ndim == 2 and p.shape[1] == 2, ids[0], lambda: "source_target_"
            f"pairs must have 2 columns, got shape {list(p.shape)}")
  ctx.check(tu.is_unique(p[:, 0].tolist()), ids[1], lambda: "sources "
            f"{p[:, 0].tolist()} must be unique")
  ctx.check(tu.is_unique(p[:, 1].tolist()), ids[2], lambda: "targets "
            f"{p[:, 1].tolist()} must be unique")
  ctx.check(bool(np.all(p >= 0)), ids[3], lambda: "source_target_pairs "
            f"{p.tolist()} contain a negative id")


def _verify_collective_permute(ctx):
  _check_pairs(ctx)
  c.same_type(ctx, "c5", [ctx.operand_types[0], ctx.result_types[0]],
              ["operand", "result"])


_define_op("stablehlo.collective_permute", _verify_collective_permute,
           ("c1", "c2", "c3", "c4", "c5"), ("operand",), results=("result",),
           attributes={"source_target_pairs": "dense<i64>",
                       "channel_handle?": "#stablehlo.channel_handle"},
           infer=lambda ctx: [ctx.operand_types[0]])


def _verify_collective_reduce(ctx):
  groups = _groups(ctx)
  _check_groups(ctx, groups, "c1", "c2")
  ins, outs = ctx.operand_types, ctx.result_types
  data = ins[:-1] if ctx.bool("has_dynamic_root") else ins
  ctx.check(len(outs) == len(data), "c3", f"expects {len(data)} results, got "
            f"{len(outs)}")
  for i, (x, y) in enumerate(zip(data, outs)):
    ctx.check_result_shape(i, tu.shape_of(x), "c3", f"result #{i}")
  if data:
    c.check_reducer(ctx, "c4", 0, "computation", [tu.element_type(data[0])])


_define_op("stablehlo.collective_reduce", _verify_collective_reduce,
           ("c1", "c2", "c3", "c4"), ("operands*",),
           attributes={"replica_groups": "dense<i64>",
                       "channel_handle?": "#stablehlo.channel_handle",
                       "has_dynamic_root?": "bool"},
           regions=("computation",))

# Channel types of #stablehlo.channel_handle (as in XLA's ChannelHandle).
_DEVICE_TO_DEVICE, _DEVICE_TO_HOST, _HOST_TO_DEVICE = 1, 2, 3


def _check_channel_type(ctx, host_types):
  ct = _channel_type(ctx)
  if ct not in (_DEVICE_TO_DEVICE, _DEVICE_TO_HOST, _HOST_TO_DEVICE):
    return  # unset / invalid handles are the runtime's concern
  host = ctx.bool("is_host_transfer")
  want = host_types if host else (_DEVICE_TO_DEVICE,)
  ctx.check(ct in want, "c5", f"channel type {ct} does not match "
            f"is_host_transfer = {str(host).lower()}")


def _verify_send(ctx):
  ctx.check(ctx.operand_types and tu.is_token(ctx.operand_types[-1]),
            "send_schema", "the last operand must be a token")
  _check_pairs(ctx)
  _check_channel_type(ctx, (_DEVICE_TO_HOST,))


_define_op("stablehlo.send", _verify_send, ("c1", "c2", "c3", "c4", "c5"),
           ("inputs*", "token"), results=("result",),
           attributes={"channel_handle": "#stablehlo.channel_handle",
                       "is_host_transfer?": "bool",
                       "source_target_pairs?": "dense<i64>"},
           traits=_COLL | _SIDE)


def _verify_recv(ctx):
  ctx.check(ctx.result_types and tu.is_token(ctx.result_types[-1]),
            "recv_schema", "the last result must be a token")
  _check_pairs(ctx)
  _check_channel_type(ctx, (_DEVICE_TO_HOST, _HOST_TO_DEVICE))


_define_op("stablehlo.recv", _verify_recv, ("c1", "c2", "c3", "c4", "c5"),
           ("token",),
           attributes={"channel_handle": "#stablehlo.channel_handle",
                       "is_host_transfer?": "bool",
                       "source_target_pairs?": "dense<i64>"},
           traits=_COLL | _SIDE)

# --- infeed / outfeed / tokens / ids ---------------------------------------------------


def _verify_infeed(ctx):
  ctx.check(tu.is_token(ctx.operand_types[0]), "infeed_schema",
            "operand must be a token")
  outs = ctx.result_types
  ctx.check(len(outs) > 0, "c1", "needs at least one result")
  ctx.check(all(tu.is_tensor(x) for x in outs[:-1]), "c2", lambda: "all "
            f"results but the last must be tensors: {tu.fmt_types(outs)}")
  ctx.check(tu.is_token(outs[-1]), "c3", lambda: "the last result must be a "
            f"token, got {tu.fmt_type(outs[-1])}")


_define_op("stablehlo.infeed", _verify_infeed, ("c1", "c2", "c3"), ("token",),
           attributes={"infeed_config?": "str", "layout?": "array"},
           traits=_SIDE)


def _verify_outfeed(ctx):
  ctx.check(tu.is_token(ctx.operand_types[-1]), "outfeed_schema",
            "the last operand must be a token")
  ctx.check(tu.is_token(ctx.result_types[0]), "outfeed_schema",
            "result must be a token")


_define_op("stablehlo.outfeed", _verify_outfeed, (), ("inputs*", "token"),
           results=("result",), attributes={"outfeed_config?": "str"},
           traits=_SIDE)


def _verify_tokens_only(ctx):
  for i, ty in enumerate(ctx.operand_types):
    ctx.check(tu.is_token(ty), ctx.short + "_schema",
              f"operand #{i} must be a token, got {tu.fmt_type(ty)}")
  ctx.check(tu.is_token(ctx.result_types[0]), ctx.short + "_schema",
            "result must be a token")


_define_op("stablehlo.after_all", _verify_tokens_only, (), ("inputs*",),
           results=("result",), traits=frozenset(), infer=lambda ctx: [t.token])
_define_op("stablehlo.create_token", _verify_tokens_only, (), (),
           results=("output",), traits=frozenset({r.DEPRECATED}), spec=False,
           infer=lambda ctx: [t.token])


def _verify_process_id(ctx):
  c.check_tensor(ctx, ctx.result_types[0], "result", "uint", rank=0)


_UI32_SCALAR = t.RankedTensorType((), t.IntegerType(32, unsigned=True))
for _name in ("stablehlo.replica_id", "stablehlo.partition_id"):
  _define_op(_name, _verify_process_id, (), (), results=("result",),
             traits=frozenset(), infer=lambda ctx: [_UI32_SCALAR])


def _verify_cross_replica_sum(ctx):
  c.same_type(ctx, "cross-replica-sum_schema",
              [ctx.operand_types[0], ctx.result_types[0]],
              ["operand", "result"])


_define_op("stablehlo.cross-replica-sum", _verify_cross_replica_sum, (),
           ("operand",), results=("result",),
           attributes={"replica_groups": "dense<i64>"},
           traits=_COLL | {r.DEPRECATED}, spec=False)

# --- async_start / async_done ---------------------------------------------------------

_ASYNC_BODY_OPS = tuple("stablehlo." + n for n in (
    "all_reduce", "all_gather", "all_to_all", "collective_permute",
    "reduce_scatter", "collective_broadcast", "slice", "dynamic_slice",
    "dynamic_update_slice"))


def future_value_type(ty):
  """The `T` of a `!stablehlo.future<T>` type, as a type object when the IR
  models futures, else as its text; None if `ty` is not a future."""
  for field in ("value_type", "type", "types"):
    inner = getattr(ty, field, None)
    if inner is not None and not isinstance(ty, t.RankedTensorType):
      return inner
  if isinstance(ty, t.OpaqueType) and ty.body.startswith("future<"):
    return ty.body[len("future<"):-1]
  return None


def _same_future_payload(inner, ty) -> bool:
  if isinstance(inner, str):
    return inner.replace(" ", "") == tu.fmt_type(ty).replace(" ", "")
  if isinstance(inner, tuple):
    return len(inner) == 1 and inner[0] == ty
  return inner == ty


def _verify_async_start(ctx):
  region = ctx.op.regions[0]
  ops = region.blocks[0].operations if region.blocks else []
  ctx.check(len(ops) == 2 and ops[-1].name in c.RETURN_OPS, "c1",
            lambda: "body must hold one op and a return, holds "
            f"{[o.name for o in ops]}")
  inner = ops[0]
  ctx.check(inner.name in _ASYNC_BODY_OPS, "c2", f"'{inner.name}' cannot "
            "run asynchronously (only collectives and slices)")
  args = region.blocks[0].arguments
  ctx.check(len(args) == len(ctx.op.operands) and all(
      tu.types_compatible(p.type, q) for p, q in
      zip(args, ctx.operand_types)) and [v.owner for v in inner.operands] ==
            [region.blocks[0]] * len(inner.operands), "c3",
            "async_start operands must be passed through to the body op")
  fut = future_value_type(ctx.result_types[0])
  rts = inner.result_types
  ctx.check(fut is not None and len(rts) == 1 and
            _same_future_payload(fut, rts[0]), "c4", lambda: "result "
            f"{tu.fmt_type(ctx.result_types[0])} must be a future of "
            f"{tu.fmt_types(rts)}")


_define_op("stablehlo.async_start", _verify_async_start,
           ("c1", "c2", "c3", "c4"), ("operands*",), results=("result",),
           regions=("body",), traits=frozenset())


def _verify_async_done(ctx):
  fut = future_value_type(ctx.operand_types[0])
  y = ctx.result_types[0]
  ctx.check(fut is not None and _same_future_payload(fut, y), "c1",
            lambda: f"result {tu.fmt_type(y)} must be the payload of "
            f"{tu.fmt_type(ctx.operand_types[0])}")


_define_op("stablehlo.async_done", _verify_async_done, ("c1",), ("operand",),
           results=("result",), traits=frozenset())

# --- interpreter.run_parallel (the conformance corpora's process grid) -------

r.define_op("interpreter.run_parallel", None, operands=("inputs*",),
            results=("results*",), attributes={"programs": "array",
                                               "infeed?": "array"},
            traits=_SIDE, spec=False)
