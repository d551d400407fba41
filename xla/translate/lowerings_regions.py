"""Lowerings of ops with regions or symbol references: reduce-like ops
(their region becomes a `to_apply` computation), control flow (while /
if / case become while / conditional with tuple-parameter computations that
also carry the captured values), calls and composites (inlined),
custom calls and ml_program globals.
"""

from __future__ import annotations

import json

import support
from stablehlo import attributes as a
from stablehlo.ops import registry
from xla import xla_data
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.shape import Shape
from xla.translate import region_util
from xla.translate import sharding_import
from xla.translate import type_conversion as tc
from xla.translate.lowerings import bool_attr
from xla.translate.lowerings import int_attr
from xla.translate.lowerings import ints
from xla.translate.lowerings import window_of


def _register(name):
  def deco(fn):
    registry.register_hlo_lowering(name, fn)
    return fn
  return deco


def _short(op) -> str:
  return op.name.split(".", 1)[1]


@_register("stablehlo.reduce")
def _reduce(imp, op):
  n = len(op.results)
  comp = imp.scalar_computation(op.regions[0], f"{_short(op)}_body")
  operands = imp.operands(op)
  instr = imp.add(hi.create_reduce(
      imp.result_shape(op), operands[:n], operands[n:],
      ints(op.attr("dimensions")), comp))
  return imp.unpack(instr, n)


@_register("stablehlo.reduce_window")
def _reduce_window(imp, op):
  n = len(op.results)
  comp = imp.scalar_computation(op.regions[0], f"{_short(op)}_body")
  rank = op.operands[0].type.rank
  instr = imp.add(hi.create(
      O.kReduceWindow, imp.result_shape(op), imp.operands(op),
      window=window_of(op, rank), to_apply=comp))
  return imp.unpack(instr, n)


@_register("stablehlo.select_and_scatter")
def _select_and_scatter(imp, op):
  select = imp.scalar_computation(op.regions[0], "select")
  scatter = imp.scalar_computation(op.regions[1], "scatter")
  rank = op.operands[0].type.rank
  return [imp.add(hi.create(
      O.kSelectAndScatter, imp.result_shape(op), imp.operands(op),
      window=window_of(op, rank), select=select, scatter=scatter))]


@_register("stablehlo.scatter")
def _scatter(imp, op):
  n = len(op.results)
  comp = imp.scalar_computation(op.regions[0], f"{_short(op)}_body")
  d = op.attr("scatter_dimension_numbers")
  instr = imp.add(hi.create(
      O.kScatter, imp.result_shape(op), imp.operands(op),
      update_window_dims=ints(d.get("update_window_dims")),
      inserted_window_dims=ints(d.get("inserted_window_dims")),
      scatter_dims_to_operand_dims=ints(
          d.get("scatter_dims_to_operand_dims")),
      input_batching_dims=ints(d.get("input_batching_dims")),
      scatter_indices_batching_dims=ints(
          d.get("scatter_indices_batching_dims")),
      index_vector_dim=int(d.get("index_vector_dim", 0)),
      indices_are_sorted=bool_attr(op, "indices_are_sorted"),
      unique_indices=bool_attr(op, "unique_indices"),
      to_apply=comp))
  return imp.unpack(instr, n)


@_register("stablehlo.sort")
def _sort(imp, op):
  n = len(op.results)
  comp = imp.scalar_computation(op.regions[0], "comparator")
  dim = int_attr(op, "dimension", -1)
  if dim < 0:
    dim += op.operands[0].type.rank
  instr = imp.add(hi.create(
      O.kSort, imp.result_shape(op), imp.operands(op), dimensions=(dim,),
      is_stable=bool_attr(op, "is_stable"), to_apply=comp))
  return imp.unpack(instr, n)


@_register("stablehlo.map")
def _map(imp, op):
  comp = imp.scalar_computation(op.regions[0], "map_body")
  return [imp.add(hi.create(
      O.kMap, imp.result_shape(op), imp.operands(op),
      dimensions=ints(op.attr("dimensions")), to_apply=comp))]


# -- control flow ----------------------------------------------------------------


@_register("stablehlo.while")
def _while(imp, op):
  n = len(op.operands)
  captures = region_util.free_values(op.regions)
  init_values = imp.operands(op) + [imp.scope.get(v) for v in captures]
  init = imp.add(hi.create_tuple(init_values))
  shape = init.shape

  def cond_result(comp, param, values):
    return values[0]

  def body_result(comp, param, values):
    passthrough = [imp.add(hi.create_get_tuple_element(param, n + j))
                   for j in range(len(captures))]
    return imp.add(hi.create_tuple(list(values) + passthrough))

  cond = imp.tuple_computation(op.regions[0], "while_cond", shape, captures,
                               n, cond_result)
  body = imp.tuple_computation(op.regions[1], "while_body", shape, captures,
                               n, body_result)
  loop = imp.add(hi.create_while(shape, cond, body, init))
  return [imp.add(hi.create_get_tuple_element(loop, i)) for i in range(n)]


def _branches(imp, op, regions, index):
  captures = region_util.free_values(regions)
  arg = imp.add(hi.create_tuple([imp.scope.get(v) for v in captures]))

  def result(comp, param, values):
    return imp.add(hi.create_tuple(list(values)))

  comps = [imp.tuple_computation(r, f"branch_{i}", arg.shape, captures, 0,
                                 result) for i, r in enumerate(regions)]
  shape = Shape.tuple_of(tc.shape(ty) for ty in op.result_types)
  if index.shape.element_type.name == "PRED":
    cond = imp.add(hi.create(
        O.kConditional, shape, (index, arg, arg),
        true_computation=comps[0], false_computation=comps[1]))
  else:
    cond = imp.add(hi.create_conditional(shape, index, comps,
                                         [arg] * len(comps)))
  return [imp.add(hi.create_get_tuple_element(cond, i))
          for i in range(len(op.results))]


@_register("stablehlo.if")
def _if(imp, op):
  return _branches(imp, op, op.regions, imp.operand(op, 0))


@_register("stablehlo.case")
def _case(imp, op):
  return _branches(imp, op, op.regions, imp.operand(op, 0))


# -- calls ---------------------------------------------------------------------


@_register("func.call")
def _call(imp, op):
  fn = imp.lookup_function(op.attr("callee"))
  return imp.inline_function(fn, imp.operands(op))


@_register("stablehlo.composite")
def _composite(imp, op):
  fn = imp.lookup_function(op.attr("decomposition"))
  return imp.inline_function(fn, imp.operands(op))


def _approx_top_k(imp, op):
  """JAX's `ApproxTopK` custom call (lax.approx_max_k / approx_min_k) as
  XLA's CPU compiler runs it: its exact fallback, a sort of the inputs by
  the called comparator along `reduction_dim`, of which each result keeps
  the leading elements (k, or the approximate size with
  aggregate_to_topk=false). Operands are the inputs then as many initial
  values (unused by the fallback)."""
  config = op.attr("mhlo.backend_config")
  entries = dict(config.entries) if isinstance(config, a.DictionaryAttr) else {}
  if "reduction_dim" not in entries or "top_k" not in entries:
    raise support.InvalidArgumentError(
        "custom_call @ApproxTopK needs mhlo.backend_config with top_k and "
        "reduction_dim")
  called = op.attr("called_computations")
  if called is None or len(called.elements) != 1:
    raise support.InvalidArgumentError(
        "custom_call @ApproxTopK needs one called computation (the "
        "comparator)")
  n = len(op.results)
  if len(op.operands) != 2 * n:
    raise support.InvalidArgumentError(
        f"custom_call @ApproxTopK has {len(op.operands)} operands for {n} "
        "results (inputs, then as many initial values)")
  fn = imp.lookup_function(called.elements[0])
  comp = imp.scalar_computation(fn.regions[0], "comparator")
  inputs = imp.operands(op)[:n]
  rank = inputs[0].shape.rank
  dim = int(entries["reduction_dim"].value)
  if dim < 0:
    dim += rank
  sort = imp.add(hi.create(
      O.kSort, Shape.tuple_of(x.shape for x in inputs), inputs,
      dimensions=(dim,), is_stable=False, to_apply=comp))
  results = []
  for i, result in enumerate(op.results):
    shape = tc.shape(result.type)
    whole = imp.add(hi.create_get_tuple_element(sort, i))
    results.append(imp.add(hi.create_slice(
        shape, whole, [0] * rank, list(shape.dimensions))))
  return results


@_register("stablehlo.custom_call")
def _custom_call(imp, op):
  target = op.attr("call_target_name").value
  if target == "Sharding" and imp.drops_shardings() and len(
      op.operands) == 1:
    # A sharding annotation in a reduction's body: nothing to split.
    return [imp.operand(op, 0)]
  attrs = {}
  side_effect = bool_attr(op, "has_side_effect") or target.startswith(
      "check.")
  if side_effect:
    attrs["custom_call_has_side_effect"] = True
  if target == "ApproxTopK":
    return _approx_top_k(imp, op)
  if op.attr("called_computations") is not None and (
      op.attr("called_computations").elements):
    raise support.UnimplementedError(
        f"Unimplemented: custom_call @{target} with called_computations")
  if len(op.results) == 1:
    shape = tc.shape(op.result.type)
  else:
    shape = Shape.tuple_of(tc.shape(ty) for ty in op.result_types)
  instr = hi.create_custom_call(shape, imp.operands(op), target, **attrs)
  config = op.attr("backend_config")
  if isinstance(config, a.StringAttr):
    instr.backend_config = config.value
  _typed_ffi_attributes(op, instr)
  instr = imp.add(instr)
  if not op.results:
    # No result for the lowering's caller to annotate: the call itself
    # takes the op's sharding (a host callback's `{maximal device=0}`,
    # which runs it on one device of a partitioned program).
    shardings = (None if imp.drops_shardings() else
                 sharding_import.op_shardings(op))
    if shardings:
      instr.sharding = sharding_import.text(shardings[0])
    return []
  if len(op.results) == 1:
    return [instr]
  return [imp.add(hi.create_get_tuple_element(instr, i))
          for i in range(len(op.results))]


def _typed_ffi_attributes(op, instr) -> None:
  """Typed-FFI custom calls (JAX's `jax.ffi` lowerings, e.g. the LAPACK
  calls) carry their attributes as a dictionary `mhlo.backend_config`; XLA
  keeps it as the dictionary's text in backend_config (`{uplo = 76 : ui8}`),
  and so do we. `mhlo.frontend_attributes` become the instruction's."""
  from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
  config = op.attr("mhlo.backend_config")
  if isinstance(config, a.DictionaryAttr):
    instr.backend_config = mlir_text.format_attr(config)
    instr.set_attr("api_version",
                   xla_data.CustomCallApiVersion.API_VERSION_TYPED_FFI)
  front = op.attr("mhlo.frontend_attributes")
  if isinstance(front, a.DictionaryAttr):
    instr.frontend_attributes = {
        k: (v.value if isinstance(v, a.StringAttr) else
            mlir_text.format_attr(v)) for k, v in front.entries}


# -- check dialect ops (conformance corpora) -------------------------------------
#
# `check.expect_*` ops become side-effecting custom calls named after the
# pair form (`check.expect_eq`, `check.expect_almost_eq`,
# `check.expect_close`); a `_const` form gets its expected value as a
# constant operand. Their parameters travel as JSON in `backend_config`
# (absent: the testdata `@check.*` custom-call defaults).


def _check_config(op, defaults: dict) -> str:
  config = dict(defaults)
  for name in defaults:
    v = op.attr(name)
    if isinstance(v, a.FloatAttr):
      config[name] = float(v.value)
    elif isinstance(v, a.IntegerAttr):
      config[name] = int(v.value)
  return json.dumps(config, sort_keys=True)


def _register_check(name, target, params, const):
  @_register(name)
  def _lower(imp, op):
    operands = imp.operands(op)
    if const:
      operands.append(imp.add(hi.create_constant(
          tc.literal(op.attr("value"), op.operands[0].type))))
    instr = hi.create_custom_call(Shape.tuple_of([]), operands, target,
                                  custom_call_has_side_effect=True)
    instr.backend_config = _check_config(op, params)
    imp.add(instr)
    return []
  return _lower


# The check dialect's defaults (the interpreter's `checks.py`).
_TOLERANCE = {"tolerance": 1e-4}
_ULPS = {"max_ulp_difference": 0, "min_ulp_difference": 0}
_register_check("check.expect_eq", "check.expect_eq", {}, False)
_register_check("check.expect_eq_const", "check.expect_eq", {}, True)
_register_check("check.expect_almost_eq", "check.expect_almost_eq",
                _TOLERANCE, False)
_register_check("check.expect_almost_eq_const", "check.expect_almost_eq",
                _TOLERANCE, True)
_register_check("check.expect_close", "check.expect_close", _ULPS, False)


# -- ml_program globals ----------------------------------------------------------


def _global_name(op) -> str:
  ref = op.attr("global")
  return ref.root if isinstance(ref, a.SymbolRefAttr) else str(ref)


@_register("ml_program.global_load")
def _global_load(imp, op):
  name = _global_name(op)
  if name not in imp.globals or imp.computation is not (
      imp.hlo_entry_computation()):
    raise support.UnimplementedError(
        f"Unimplemented: ml_program.global_load of @{name} inside a region")
  return [imp.globals[name]]


@_register("ml_program.global_load_const")
def _global_load_const(imp, op):
  return _global_load(imp, op)


@_register("ml_program.global_store")
def _global_store(imp, op):
  name = _global_name(op)
  if name not in imp.globals or imp.computation is not (
      imp.hlo_entry_computation()):
    raise support.UnimplementedError(
        f"Unimplemented: ml_program.global_store of @{name} inside a region")
  imp.globals[name] = imp.operand(op, 0)
  return []


# -- collectives -------------------------------------------------------------------


def _channel_id(op):
  """The channel handle's id, or None for none (or a non-positive one)."""
  h = op.attr("channel_handle")
  if h is None:
    return None
  params = dict(getattr(h, "params", ()) or ())
  handle = int(params.get("handle", 0))
  return handle if handle > 0 else None


def _id_groups(op, name: str) -> tuple[tuple[int, ...], ...]:
  """A 2-D id attribute (replica_groups, source_target_pairs) as tuples;
  -1 pads ragged groups and is dropped."""
  v = op.attr(name)
  if v is None:
    return ()
  if not isinstance(v, a.DenseElementsAttr):
    raise support.UnimplementedError(
        f"Unimplemented: {op.name}: {name} given as {type(v).__name__}")
  arr = v.array
  if arr.ndim != 2:
    arr = arr.reshape(-1, arr.shape[-1] if arr.ndim else 1) if arr.size else (
        arr.reshape(0, 0))
  return tuple(tuple(int(x) for x in row if x >= 0) for row in arr)


def _collective_attrs(op, with_global_ids: bool) -> dict:
  attrs = {"replica_groups": _id_groups(op, "replica_groups")}
  channel = _channel_id(op)
  if channel is not None:
    attrs["channel_id"] = channel
  if with_global_ids:
    attrs["use_global_device_ids"] = bool_attr(op, "use_global_device_ids")
  return attrs


@_register("stablehlo.all_reduce")
def _all_reduce(imp, op):
  n = len(op.results)
  comp = imp.scalar_computation(op.regions[0], "all_reduce_body")
  instr = imp.add(hi.create(
      O.kAllReduce, imp.result_shape(op), imp.operands(op),
      to_apply=comp, **_collective_attrs(op, True)))
  return imp.unpack(instr, n)


@_register("stablehlo.reduce_scatter")
def _reduce_scatter(imp, op):
  comp = imp.scalar_computation(op.regions[0], "reduce_scatter_body")
  return [imp.add(hi.create(
      O.kReduceScatter, imp.result_shape(op), imp.operands(op),
      dimensions=(int_attr(op, "scatter_dimension"),), to_apply=comp,
      **_collective_attrs(op, True)))]


@_register("stablehlo.all_gather")
def _all_gather(imp, op):
  n = len(op.results)
  instr = imp.add(hi.create(
      O.kAllGather, imp.result_shape(op), imp.operands(op),
      dimensions=(int_attr(op, "all_gather_dim"),),
      **_collective_attrs(op, True)))
  return imp.unpack(instr, n)


@_register("stablehlo.all_to_all")
def _all_to_all(imp, op):
  """HLO's all-to-all splits and concatenates along one dimension; other
  pairs go through a reshape and transpose after it (XLA's
  XlaBuilder::AllToAllArray). Each operand is its own all-to-all."""
  split = int_attr(op, "split_dimension")
  concat = int_attr(op, "concat_dimension")
  count = int_attr(op, "split_count")
  attrs = _collective_attrs(op, False)
  out = []
  for x, ty in zip(imp.operands(op), op.result_types):
    dims = list(x.shape.dimensions)
    et = x.shape.element_type
    a2a = imp.add(hi.create(O.kAllToAll, Shape.array(et, dims), [x],
                            dimensions=(split,), **attrs))
    if split == concat:
      out.append(a2a)
      continue
    # [.., n * s, ..] -> [.., n, s, ..]: n indexes the sender.
    sizes = []
    for i, d in enumerate(dims):
      sizes += [count, d // count] if i == split else [d]
    y = imp.add(hi.create_reshape(Shape.array(et, sizes), a2a))
    perm = []
    for i in range(len(dims)):
      after = i + 1 if i >= split else i
      if i == concat:
        perm.append(split)
      perm.append(after)
    y = imp.add(hi.create_transpose(
        Shape.array(et, [sizes[p] for p in perm]), y, perm))
    out.append(imp.add(hi.create_reshape(tc.shape(ty), y)))
  return out


@_register("stablehlo.collective_permute")
def _collective_permute(imp, op):
  attrs = {"source_target_pairs": _id_groups(op, "source_target_pairs")}
  channel = _channel_id(op)
  if channel is not None:
    attrs["channel_id"] = channel
  return [imp.add(hi.create(O.kCollectivePermute, imp.result_shape(op),
                            imp.operands(op), **attrs))]


@_register("stablehlo.collective_broadcast")
def _collective_broadcast(imp, op):
  return [imp.add(hi.create(O.kCollectiveBroadcast, imp.result_shape(op),
                            imp.operands(op),
                            **_collective_attrs(op, False)))]


_UNSUPPORTED = {
    "stablehlo.uniform_quantize": "quantized types (lower quantization first)",
    "stablehlo.uniform_dequantize":
        "quantized types (lower quantization first)",
    "stablehlo.dynamic_broadcast_in_dim": "dynamic shapes",
    "stablehlo.dynamic_conv": "dynamic shapes",
    "stablehlo.dynamic_gather": "dynamic shapes",
    "stablehlo.dynamic_iota": "dynamic shapes",
    "stablehlo.dynamic_pad": "dynamic shapes",
    "stablehlo.dynamic_reshape": "dynamic shapes",
    "stablehlo.real_dynamic_slice": "dynamic shapes",
    "stablehlo.set_dimension_size": "dynamic shapes",
    "stablehlo.einsum": "deprecated op; not in XLA's exporter",
    "stablehlo.unary_einsum": "deprecated op; not in XLA's exporter",
    "stablehlo.cross-replica-sum": "deprecated op",
    "stablehlo.collective_reduce": "HLO has no collective-reduce",
    "stablehlo.async_start": "async ops are not imported yet",
    "stablehlo.async_done": "async ops are not imported yet",
    "stablehlo.infeed": "infeed/outfeed are not imported yet",
    "stablehlo.outfeed": "infeed/outfeed are not imported yet",
    "stablehlo.send": "send/recv are not imported yet",
    "stablehlo.recv": "send/recv are not imported yet",
    "interpreter.run_parallel": "interpreter-only op",
    "interpreter.print": "interpreter-only op",
    "interpreter.probe": "interpreter-only op",
}
for _name, _why in _UNSUPPORTED.items():
  if registry.lookup(_name) is not None:
    registry.mark_unsupported(_name, "hlo_lowering", _why)
for _d in registry.all_ops():
  if _d.hlo_lowering is not None:
    continue
  if _d.name.startswith("chlo.") or _d.name.startswith("check."):
    registry.mark_unsupported(
        _d.name, "hlo_lowering",
        "legalize CHLO first (chlo_legalize.run)" if _d.name.startswith(
            "chlo.") else "check dialect ops are interpreter-only; the "
        "testdata @check.* custom calls and the check.expect_* ops are "
        "imported")
