"""Host callbacks on openxla_cpu: jax.debug.print / jax.debug.callback,
jax.pure_callback and jax.experimental.io_callback.

JAX 0.10.2 lowers Python callbacks for "cpu", "cuda", "rocm" and "tpu" only:
on any other platform `jax.debug.print` inside `jit` fails with "MLIR
translation rule for primitive 'debug_print' not found", and pure_callback
with "`EmitPythonCallback` not supported". Its "cpu" lowering hands the
function to jaxlib's CPU client, which a plugin cannot reach.

Our CPU backend runs in the same process as JAX, so the function can go to
it directly: each rule registers the Python function with the backend
(`backends.register_host_callback`) and emits a custom call naming it by
index; at run time the backend calls it with the operands as numpy arrays
and writes what it returns. Ordered effects (`debug.print(ordered=True)`,
ordered io_callback) thread JAX's token through the call, as JAX's own
rules do.

Arguments reach the function as JAX's own impls pass them: where JAX's
"cpu" backend is initialised too (`JAX_PLATFORMS=openxla_cpu,cpu`), the
primitive's impl runs, which puts them on a CPU device. Otherwise they are
put on our platform's first device instead, which is also JAX's default
device while the function runs (so `jnp` code in it runs there), as the
impls do with their CPU device.

Several devices: inside `shard_map` (all axes manual) each device calls
the function with its own shard, as on JAX's CPU backend; in a `jit` over
several devices JAX annotates the call `{maximal device=0}` (or the device
of a pure_callback's SingleDeviceSharding), and the SPMD partitioner runs
it there alone, with its operands whole, and gives its results to every
device, as XLA does.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np


# The platform the rules are registered for (`register`).
_PLATFORM = "openxla_cpu"


def _has_cpu_backend() -> bool:
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  try:
    return bool(xla_bridge.local_devices(backend="cpu"))
  except RuntimeError:
    return False


def _emit(ctx, fn, operands, *, effect=None, has_side_effect: bool,
          sharding=None, partitioned: bool = False):
  """Emits the custom call of `fn` (numpy arrays in, a sequence of arrays
  out), with `sharding` (JAX's annotation for the call) if any, and
  threads the token of ordered `effect` through it; returns its
  results. `partitioned`: every device calls `fn` with its own shards."""
  from jax._src import ffi  # pylint: disable=g-import-not-at-top
  from jax._src import core  # pylint: disable=g-import-not-at-top
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  from pjrt._src.plugin import backends  # pylint: disable=g-import-not-at-top
  result_avals = list(ctx.avals_out)
  checked = _checked(fn, result_avals)
  token = ctx.tokens_in.get(effect) if effect is not None else None
  call_ctx = ctx
  if token is not None:
    operands = [token, *operands]
    from jax._src import sharding_impls as si  # pylint: disable=g-import-not-at-top
    if isinstance(sharding, si.SdyArrayList) and result_avals:
      # One annotation per result: the token's first (as JAX's rule).
      sharding = si.SdyArrayList((
          si.SdyArray(mesh_shape=(), dim_shardings=(),
                      logical_device_ids=(
                          sharding.shardings[0].logical_device_ids)),
          *sharding.shardings))
    call_ctx = dataclasses.replace(
        ctx, avals_in=[core.abstract_token, *ctx.avals_in],
        avals_out=[core.abstract_token, *ctx.avals_out])
  target, index = backends.register_host_callback(checked, partitioned)
  # Registered as JAX registers its own: the module then counts as having
  # host callbacks, so JAX runs it with a completion token that its effects
  # barrier waits on (an error in a callback whose result is never read
  # surfaces there), keeps it out of its compilation cache, and keeps
  # `checked` alive with the executable.
  ctx.module_context.add_host_callback(checked)
  op = ffi.build_ffi_lowering_function(target, has_side_effect=has_side_effect)(
      call_ctx, *operands, index=np.uint64(index))
  if sharding is not None:
    mlir.set_sharding(ctx.module_context, op, sharding)
  results = list(op.results)
  if effect is not None:
    new_token = results.pop(0) if token is not None else None
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(
        mlir.TokenSet({effect: new_token})))
  return results


def _checked(fn, result_avals):
  """`fn` with its results converted and checked against `result_avals`."""

  from jax._src import dtypes  # pylint: disable=g-import-not-at-top

  def call(*args):
    values = fn(*args)
    values = () if values is None else tuple(values)
    if len(values) != len(result_avals):
      raise RuntimeError(
          "Mismatched number of outputs from callback. "
          f"Expected: {len(result_avals)}, Actual: {len(values)}")
    out = []
    for k, (v, aval) in enumerate(zip(values, result_avals)):
      # Python scalars and 64-bit values as JAX's own rule takes them.
      arr = dtypes.canonicalize_value(np.asarray(v))
      if arr.shape != tuple(aval.shape):
        raise RuntimeError(
            f"Incorrect output shape for return value #{k}: "
            f"Expected: {aval.shape}, Actual: {arr.shape}")
      if arr.dtype != aval.dtype:
        raise RuntimeError(
            f"Incorrect output dtype for return value #{k}: "
            f"Expected: {aval.dtype}, Actual: {arr.dtype}")
      out.append(arr)
    return out

  return call


def _debug_callback_rule(ctx, *args, effect, partitioned, callback,
                         **params):
  from jax._src import debugging  # pylint: disable=g-import-not-at-top
  from jax._src import effects  # pylint: disable=g-import-not-at-top
  from jax._src import sharding_impls  # pylint: disable=g-import-not-at-top
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top

  axis_context = ctx.module_context.axis_context
  if isinstance(axis_context, sharding_impls.SPMDAxisContext) and (
      set(axis_context.mesh.axis_names) - set(axis_context.manual_axes)):
    # A shard_map manual over some mesh axes only: as JAX's own rule does,
    # a nested shard_map over the rest calls back from their first device.
    lower = functools.partial(
        debugging._debug_callback_partial_auto,  # pylint: disable=protected-access
        axis_context, effect=effect, partitioned=partitioned,
        callback=callback, **params)
    return mlir.lower_fun(lower)(ctx, *args)

  def fn(*flat_args):
    # The primitive's impl, which `register` made ours: JAX's own where its
    # cpu backend runs, else `_on_our_device`.
    debugging.debug_callback_p.impl(
        *flat_args, effect=effect, partitioned=partitioned,
        callback=callback, **params)
    return ()

  if effects.ordered_effects.contains(effect):
    return _emit(ctx, fn, list(args), effect=effect, has_side_effect=True,
                 partitioned=partitioned)
  return _emit(ctx, fn, list(args), has_side_effect=True,
               sharding=_op_sharding(ctx, None), partitioned=partitioned)


def _on_our_device(callback, flat_args, logger, message: str, *,
                   empty_mesh: bool = False):
  """`callback` called as JAX's impls call it with their CPU device, with
  our platform's first device in its place: the arguments put on it, it
  the default device meanwhile (and no mesh in context, for
  `empty_mesh`), an exception logged with `message` and the traceback to
  `logger` before it propagates."""
  import contextlib  # pylint: disable=g-import-not-at-top
  from jax._src import api  # pylint: disable=g-import-not-at-top
  from jax._src import config  # pylint: disable=g-import-not-at-top
  from jax._src import mesh as mesh_lib  # pylint: disable=g-import-not-at-top
  from jax._src import sharding_impls  # pylint: disable=g-import-not-at-top
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  device = xla_bridge.local_devices(backend=_PLATFORM)[0]
  args = api.device_put(tuple(flat_args), device)
  with contextlib.ExitStack() as stack:
    stack.enter_context(config.default_device(device))
    if empty_mesh:
      stack.enter_context(sharding_impls._internal_use_concrete_mesh(  # pylint: disable=protected-access
          mesh_lib.empty_concrete_mesh))
      stack.enter_context(mesh_lib.use_abstract_mesh(
          mesh_lib.empty_abstract_mesh))
    try:
      return callback(*args)
    except BaseException:
      logger.exception(message)
      raise


def _op_sharding(ctx, sharding):
  """JAX's sharding annotation for a callback (a maximal one under jit)."""
  from jax._src import callback as cb  # pylint: disable=g-import-not-at-top
  return cb._callback_op_sharding(  # pylint: disable=protected-access
      ctx.module_context.axis_context, sharding, ctx.avals_out)


def _debug_print_rule(ctx, *dyn_args, fmt, ordered, partitioned, in_tree,
                      static_args, np_printoptions, has_placeholders,
                      logging_record):
  import functools  # pylint: disable=g-import-not-at-top
  from jax._src import debugging  # pylint: disable=g-import-not-at-top
  # The same callback JAX's own rule builds (private helpers of
  # jax._src.debugging at 0.10.2).
  callback = functools.partial(
      debugging._format_print_callback, fmt, dict(np_printoptions),  # pylint: disable=protected-access
      has_placeholders, logging_record)
  callback = debugging._make_flat_callback(in_tree, callback, static_args)  # pylint: disable=protected-access
  effect = (debugging.ordered_debug_effect if ordered
            else debugging.debug_effect)
  return _debug_callback_rule(ctx, *dyn_args, effect=effect,
                              partitioned=partitioned, callback=callback)


def _pure_callback_rule(ctx, *args, callback, sharding, **params):
  from jax._src import callback as cb  # pylint: disable=g-import-not-at-top
  op_sharding = _op_sharding(ctx, sharding)

  def fn(*flat_args):
    if _has_cpu_backend():
      return cb.pure_callback_impl(*flat_args, callback=callback,
                                   sharding=None, **params)
    return _on_our_device(callback, flat_args, cb.logger,
                          "jax.pure_callback failed")

  return _emit(ctx, fn, list(args), has_side_effect=False,
               sharding=op_sharding)


def _io_callback_rule(ctx, *args, callback, sharding, ordered, **params):
  from jax._src import callback as cb  # pylint: disable=g-import-not-at-top
  op_sharding = _op_sharding(ctx, sharding)

  def fn(*flat_args):
    if _has_cpu_backend():
      return cb.io_callback_impl(*flat_args, callback=callback,
                                 sharding=None, ordered=ordered, **params)
    return _on_our_device(callback, flat_args, cb.logger,
                          "jax.io_callback failed")

  effect = cb._OrderedIOEffect if ordered else None  # pylint: disable=protected-access
  return _emit(ctx, fn, list(args), effect=effect, has_side_effect=True,
               sharding=op_sharding)


def register(platform: str) -> list[str]:
  """Registers the rules above for `platform`; returns the primitives'
  names."""
  from jax._src import callback as cb  # pylint: disable=g-import-not-at-top
  from jax._src import debugging  # pylint: disable=g-import-not-at-top
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  global _PLATFORM
  _PLATFORM = platform
  rules = [(debugging.debug_callback_p, _debug_callback_rule),
           (cb.pure_callback_p, _pure_callback_rule),
           (cb.io_callback_p, _io_callback_rule)]
  print_p = getattr(debugging, "debug_print_p", None)
  if print_p is not None:
    rules.append((print_p, _debug_print_rule))
  for prim, rule in rules:
    # Not cacheable: each lowering registers its own function.
    mlir.register_lowering(prim, rule, platform=platform, cacheable=False)
  _patch_eager_debug_callback()
  return [prim.name for prim, _ in rules]


def _patch_eager_debug_callback() -> None:
  """Outside `jit`, `jax.debug.callback` and `jax.debug.print` run JAX's
  `debug_callback_impl` directly, which raises unless JAX's "cpu" backend
  is initialised. Where it is not, ours runs the callback with our
  platform's first device in its place (`_on_our_device`); where it is,
  JAX's own runs, unchanged. `debug_print`'s impl calls the module's
  function by name, so both the name and the primitive's impl change."""
  from jax._src import debugging  # pylint: disable=g-import-not-at-top
  jax_impl = debugging.debug_callback_impl
  if getattr(jax_impl, "_openxla_cpu", False):
    return

  def impl(*args, callback, effect, partitioned):
    if _has_cpu_backend():
      return jax_impl(*args, callback=callback, effect=effect,
                      partitioned=partitioned)
    _on_our_device(callback, args, debugging.logger,
                   "jax.debug.callback failed", empty_mesh=True)
    return ()

  impl._openxla_cpu = True  # pylint: disable=protected-access
  debugging.debug_callback_impl = impl
  debugging.debug_callback_p.def_impl(impl)
