"""Sharded JAX programs for spmd_test, run in a child interpreter:

    python -m pjrt.jax_plugin.spmd_programs PLATFORM PARTITIONER [NAME...]

PLATFORM is "openxla_cpu" (our plugin, 4 devices) or "cpu" (JAX's own CPU
backend with 4 host devices); PARTITIONER "shardy" (JAX's default) or
"gspmd" (`jax_use_shardy_partitioner` off). Both are per process in JAX,
hence the child. Prints one line "REPORT <json>": per program, the
outputs' values, dtypes and per-device shard shapes, and the compiled
executable's input / output shardings as HLO sharding text; or the error.
"""

from __future__ import annotations

import json
import os
import sys

NUM_DEVICES = 4
PROGRAMS = {}
# Programs JAX itself lowers with Shardy only (unreduced axes).
SHARDY_ONLY = set()


def _program(name, shardy_only=False):
  def deco(fn):
    PROGRAMS[name] = fn
    if shardy_only:
      SHARDY_ONLY.add(name)
    return fn
  return deco


def _define():
  """Fills PROGRAMS: name -> () -> (function, args); a function without
  `lower` is run as it is (several calls, device_put, ...)."""
  # pylint: disable=g-import-not-at-top
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax import shard_map
  from jax.sharding import Mesh
  from jax.sharding import NamedSharding
  from jax.sharding import PartitionSpec as P
  # pylint: enable=g-import-not-at-top

  devices = np.array(jax.devices()[:NUM_DEVICES])
  mesh1 = Mesh(devices, ("i",))
  mesh2 = Mesh(devices.reshape(2, 2), ("x", "y"))

  def ns(mesh, *spec):
    return NamedSharding(mesh, P(*spec))

  rng = np.random.default_rng(0)

  def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)

  a84, b46 = normal(8, 4), normal(4, 6)

  @_program("elementwise_1d")
  def _():
    return jax.jit(lambda a: jnp.sin(a) * 2 + 1, in_shardings=ns(mesh1, "i"),
                   out_shardings=ns(mesh1, "i")), (a84,)

  @_program("matmul_2d")
  def _():
    return jax.jit(lambda a, b: jnp.tanh(a) @ b,
                   in_shardings=(ns(mesh2, "x", "y"), ns(mesh2, "y", None)),
                   out_shardings=ns(mesh2, "x", None)), (a84, b46)

  @_program("reshard_2d")
  def _():
    return jax.jit(lambda a: a + 1, in_shardings=ns(mesh2, "y", None),
                   out_shardings=ns(mesh2, None, "x")), (a84,)

  @_program("constraint")
  def _():
    def fn(a):
      return jnp.exp(jax.lax.with_sharding_constraint(
          a * 2, ns(mesh2, None, "y")))
    return jax.jit(fn, in_shardings=ns(mesh2, "x", "y")), (a84,)

  @_program("reductions")
  def _():
    return jax.jit(lambda a: (jnp.sum(a, axis=0), jnp.max(a, axis=1),
                              jnp.mean(a)),
                   in_shardings=ns(mesh2, "x", "y")), (a84,)

  @_program("unspecified_out_2d")
  def _():
    return jax.jit(lambda a, b: (a.T @ b.T, a * 2),
                   in_shardings=(ns(mesh2, "x", "y"), ns(mesh2, None, "x"))
                   ), (a84, normal(6, 8))

  @_program("uneven_inside")
  def _():
    # Slices of 6 rows of a value split 4 ways: uneven shards inside.
    return jax.jit(lambda a: (jnp.sin(a[:6]) * 2, jnp.sum(a[1:7], axis=0)),
                   in_shardings=ns(mesh1, "i")), (a84,)

  @_program("uneven_constraint")
  def _():
    return jax.jit(lambda a: jnp.cos(jax.lax.with_sharding_constraint(
        a[:6] + 1, ns(mesh1, "i"))), in_shardings=ns(mesh1, "i")), (a84,)

  @_program("fori_loop")
  def _():
    return jax.jit(
        lambda a: jax.lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c) + i, a),
        in_shardings=ns(mesh2, "x", "y"),
        out_shardings=ns(mesh2, "x", "y")), (a84,)

  @_program("ints_and_bools")
  def _():
    ints = (np.arange(32, dtype=np.int32) - 7).reshape(8, 4)
    return jax.jit(lambda a: (a * 3 // 2, a > 0, jnp.sum(a, axis=0)),
                   in_shardings=ns(mesh1, "i")), (ints,)

  @_program("mlp_grad")
  def _():
    def loss(w1, w2, x):
      h = jax.nn.relu(x @ w1)
      return jnp.sum(jnp.log1p(jnp.exp(h @ w2)))
    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)), in_shardings=(
        ns(mesh2, None, "y"), ns(mesh2, "y", None), ns(mesh2, "x", None))
                   ), (normal(4, 8), normal(8, 3), normal(16, 4))

  @_program("explicit_axes")
  def _():
    axis_type = jax.sharding.AxisType.Explicit
    mesh = jax.make_mesh((2, 2), ("x", "y"), axis_types=(axis_type,) * 2,
                         devices=list(devices))
    sharding = NamedSharding(mesh, P("x", "y"))
    f = jax.jit(lambda a, b: jnp.sin(a) * 2 + b)

    def run(a, b):
      with jax.set_mesh(mesh):
        return f(jax.device_put(a, sharding), jax.device_put(b, sharding))
    return run, (a84, a84 + 1)

  @_program("donated")
  def _():
    f = jax.jit(lambda a: a * 2 + 1, in_shardings=ns(mesh1, "i"),
                out_shardings=ns(mesh1, "i"), donate_argnums=0)
    return (lambda a: f(f(jax.device_put(a, ns(mesh1, "i"))))), (a84,)

  @_program("device_put_reshard")
  def _():
    def run(a):
      x = jax.device_put(a, ns(mesh2, "x", "y"))
      return jax.device_put(x, ns(mesh2, "y", None)) * 1
    return run, (a84,)

  @_program("shard_map_psum")
  def _():
    return jax.jit(shard_map(lambda a: jax.lax.psum(a, "i"), mesh=mesh1,
                             in_specs=P("i"), out_specs=P())), (a84,)

  @_program("shard_map_psum_2d")
  def _():
    return jax.jit(shard_map(lambda a: jax.lax.psum(a, "x") * 2, mesh=mesh2,
                             in_specs=P("x", "y"), out_specs=P(None, "y"))
                   ), (a84,)

  @_program("shard_map_all_gather")
  def _():
    return jax.jit(shard_map(
        lambda a: jax.lax.all_gather(a, "y", axis=1, tiled=True), mesh=mesh2,
        in_specs=P("x", "y"), out_specs=P("x", None), check_vma=False)
                   ), (a84,)

  @_program("shard_map_ppermute")
  def _():
    perm = [(i, (i + 1) % NUM_DEVICES) for i in range(NUM_DEVICES)]
    return jax.jit(shard_map(lambda a: jax.lax.ppermute(a, "i", perm),
                             mesh=mesh1, in_specs=P("i"), out_specs=P("i"))
                   ), (a84,)

  @_program("shard_map_psum_scatter")
  def _():
    return jax.jit(shard_map(
        lambda a: jax.lax.psum_scatter(a, "i", scatter_dimension=0,
                                       tiled=True),
        mesh=mesh1, in_specs=P(None, "i"), out_specs=P("i", None))
                   ), (normal(8, 8),)

  @_program("shard_map_all_to_all")
  def _():
    return jax.jit(shard_map(
        lambda a: jax.lax.all_to_all(a, "i", 1, 0, tiled=True), mesh=mesh1,
        in_specs=P("i", None), out_specs=P(None, "i"))), (normal(8, 8),)

  @_program("shard_map_partially_manual")
  def _():
    return jax.jit(shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh2,
                             in_specs=P("x"), out_specs=P(),
                             axis_names={"x"})), (a84,)

  @_program("shard_map_partially_manual_split_input")
  def _():
    inner = shard_map(lambda a: jax.lax.psum(jnp.sin(a), "x"), mesh=mesh2,
                      in_specs=P("x"), out_specs=P(), axis_names={"x"})
    return jax.jit(inner, in_shardings=ns(mesh2, "x", "y")), (a84,)

  @_program("unconstrained_dims")
  def _():
    unconstrained = P.UNCONSTRAINED
    return jax.jit(lambda a: jnp.exp(jax.lax.with_sharding_constraint(
        a * 2, ns(mesh2, unconstrained, "y"))) + 1,
                   in_shardings=ns(mesh2, "x", None)), (a84,)

  @_program("shard_map_unreduced_out", shardy_only=True)
  def _():
    # Each device's partial product left unreduced over "y", then summed
    # by a reshard (an all-reduce).
    from jax.sharding import AxisType  # pylint: disable=g-import-not-at-top
    explicit = Mesh(devices.reshape(2, 2), ("x", "y"),
                    axis_types=(AxisType.Explicit,) * 2)
    partial = shard_map(lambda a, b: a @ b, mesh=explicit,
                        in_specs=(P("x", "y"), P("y", None)),
                        out_specs=P("x", None, unreduced={"y"}))
    # Explicit axes: the inputs' shardings are part of their types.
    args = (jax.device_put(a84, ns(explicit, "x", "y")),
            jax.device_put(b46, ns(explicit, "y", None)))
    return jax.jit(lambda a, b: jax.sharding.reshard(
        partial(a, b), ns(explicit, "x", None))), args

  @_program("pmap_double")
  def _():
    return jax.pmap(lambda x: x * 2), (normal(4, 3),)

  @_program("pmap_psum")
  def _():
    return jax.pmap(lambda x: x - jax.lax.psum(x, "i"), axis_name="i"), (
        normal(4, 3),)

  @_program("data_parallel_training")
  def _():
    # Three steps of data-parallel SGD: each device's gradient of its
    # batch shard, averaged with pmean; and each device's loss.
    def loss(params, x, y):
      w, b = params
      return jnp.mean((jnp.tanh(x @ w) + b - y) ** 2)

    def step(params, x, y):
      value, grads = jax.value_and_grad(loss)(params, x, y)
      grads = jax.lax.pmean(grads, "i")
      return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), (
          value[None])

    f = jax.jit(shard_map(step, mesh=mesh1, in_specs=(P(), P("i"), P("i")),
                          out_specs=(P(), P("i"))))

    def run(w, b, x, y):
      params, losses = (w, b), []
      for _ in range(3):
        params, device_losses = f(params, x, y)
        losses.append(device_losses)
      return params, losses
    return run, (normal(4, 2), normal(2), normal(16, 4), normal(16, 2))

  @_program("jit_data_parallel_step")
  def _():
    def step(w, x, y):
      g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
      return w - 0.1 * g
    return jax.jit(step, in_shardings=(ns(mesh1), ns(mesh1, "i"),
                                       ns(mesh1, "i")),
                   out_shardings=ns(mesh1)), (normal(4, 2), normal(16, 4),
                                              normal(16, 2))

  @_program("conv_spatial")
  def _():
    # Images split along their height: each device's convolutions read
    # rows of its neighbours' shards (halos; the strided 5x5 one reads
    # rows two shards away).
    def fn(x, k3, k5):
      dn = ("NHWC", "HWIO", "NHWC")
      same = jax.lax.conv_general_dilated(x, k3, (1, 1), "SAME",
                                          dimension_numbers=dn)
      strided = jax.lax.conv_general_dilated(x, k5, (2, 2), "VALID",
                                             dimension_numbers=dn)
      return same, strided
    out = ns(mesh1, None, "i", None, None)
    return jax.jit(fn, in_shardings=(out, ns(mesh1), ns(mesh1)),
                   out_shardings=(out, out)), (
                       normal(2, 20, 12, 3), normal(3, 3, 3, 4),
                       normal(5, 5, 3, 4))

  @_program("pool_spatial")
  def _():
    def fn(x):
      big = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1),
                                  (1, 2, 2, 1), "SAME")
      avg = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1),
                                  (1, 1, 1, 1), "SAME") / 9
      return big, avg
    out = ns(mesh1, None, "i", None, None)
    return jax.jit(fn, in_shardings=out, out_shardings=(out, out)), (
        normal(2, 16, 12, 3),)


def _hlo_shardings(shardings, ndims) -> list:
  import jax  # pylint: disable=g-import-not-at-top
  # A jax.sharding.Sharding has no public HLO-sharding conversion.
  return [str(s._to_xla_hlo_sharding(n))  # pylint: disable=protected-access
          for s, n in zip(jax.tree.leaves(shardings), ndims)]


def main(argv) -> None:
  platform, partitioner, names = argv[0], argv[1], argv[2:]
  if platform == "cpu":
    os.environ["XLA_FLAGS"] = (
        f"--xla_force_host_platform_device_count={NUM_DEVICES}")
    os.environ["JAX_PLATFORMS"] = "cpu"
  else:
    os.environ["OPENXLA_CPU_NUM_DEVICES"] = str(NUM_DEVICES)
    os.environ["JAX_PLATFORMS"] = "openxla_cpu"
    import pjrt.jax_plugin  # pylint: disable=g-import-not-at-top
    pjrt.jax_plugin.register()
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  if partitioner == "gspmd":
    jax.config.update("jax_use_shardy_partitioner", False)
  _define()
  report = {}
  for name, make in PROGRAMS.items():
    if names and name not in names:
      continue
    if partitioner == "gspmd" and name in SHARDY_ONLY:
      continue
    try:
      f, args = make()
      leaves = jax.tree.leaves(f(*args))
      entry = {
          "values": [np.asarray(x).tolist() for x in leaves],
          "dtypes": [str(np.asarray(x).dtype) for x in leaves],
          "shards": [[list(s.data.shape) for s in x.addressable_shards]
                     for x in leaves],
          "platforms": sorted({d.platform for x in leaves
                               for d in x.devices()}),
      }
      if hasattr(f, "lower"):
        compiled = f.lower(*args).compile()
        entry["in"] = _hlo_shardings(compiled.input_shardings[0],
                                     [np.ndim(a) for a in args])
        entry["out"] = _hlo_shardings(compiled.output_shardings,
                                      [np.ndim(x) for x in leaves])
      report[name] = entry
    except Exception as e:  # pylint: disable=broad-except
      report[name] = {"error": f"{type(e).__name__}: {e}"}
  print("REPORT " + json.dumps(report))


if __name__ == "__main__":
  main(sys.argv[1:])
