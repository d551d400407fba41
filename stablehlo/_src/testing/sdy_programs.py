"""Sharded programs as JAX lowers them (tests only): Shardy meshes,
shardings, constraints and shard_map's manual computations.

`programs()` runs JAX in a child process with 8 host CPU devices (the device
count must be set before JAX starts, and the test process may already have
started it with fewer) and returns, per program name, a dict with
  "text":      `jax.jit(f).lower(...).as_text()`,
  "export":    `jax.export.export(f)(...).mlir_module()` (with locations),
  "artifact":  the exported portable artifact bytes (VHLO and sdy mixed).
Entries JAX cannot export (host callbacks) lack the last two.

Callers skip when `stablehlo._src.testing.jaxlib_oracle.skip_reason()` is
set; running this module prints the programs as JSON.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import subprocess
import sys

_DEVICES = 8


def _build(add) -> None:
  """Lowers every program; `add(name, jitted_fn, *args)` records one."""
  # pylint: disable=g-import-not-at-top
  import numpy as np
  import jax
  import jax.numpy as jnp
  from jax.experimental import io_callback
  from jax.sharding import AxisType, Mesh, NamedSharding
  from jax.sharding import PartitionSpec as P
  # pylint: enable=g-import-not-at-top

  def auto(shape, names):
    return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))

  def ns(mesh, *spec):
    return NamedSharding(mesh, P(*spec))

  x44, x8 = jnp.ones((4, 4), jnp.float32), jnp.ones((8,), jnp.float32)
  m1, m2 = auto((4,), ("x",)), auto((2, 2), ("x", "y"))
  m3 = auto((2, 2, 2), ("x", "y", "z"))

  add("jit_1d", jax.jit(lambda a: jnp.sin(a) + 1, in_shardings=ns(m1, "x"),
                        out_shardings=ns(m1)), x8)
  add("jit_2d", jax.jit(lambda a, b: (a @ b, a + b),
                        in_shardings=(ns(m2, "x", "y"), ns(m2, None, "y")),
                        out_shardings=(ns(m2, "x"), ns(m2, ("x", "y")))),
      x44, x44)
  add("mesh_3d", jax.jit(lambda a: a.reshape(2, 8),
                         in_shardings=ns(m3, ("x", "y"), "z"),
                         out_shardings=ns(m3, "z", ("x", "y"))), x44)
  add("constraint", jax.jit(lambda a: jax.lax.with_sharding_constraint(
      a * 2, ns(m2, None, "y")) + 1), x44)
  # The device order of a mesh is the partition order, not a device_ids list.
  devices = np.array(jax.devices()[:4])[[0, 2, 1, 3]].reshape(2, 2)
  mp = Mesh(devices, ("x", "y"), axis_types=(AxisType.Auto,) * 2)
  add("device_order", jax.jit(lambda a: a * 3,
                              in_shardings=ns(mp, "x", "y")), x44)
  # jax.make_mesh's default Explicit axes: a constraint after each op.
  me = jax.make_mesh((2, 2), ("x", "y"))
  with jax.set_mesh(me):
    xe = jax.device_put(np.ones((4, 4), np.float32), ns(me, "x", "y"))
    add("explicit_axes", jax.jit(lambda a: (jnp.tanh(a) * a).sum(axis=1)), xe)

  def shmap(body, mesh, in_specs, out_specs, **kw):
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_specs,
                                 out_specs=out_specs, **kw))

  add("shard_map_psum", shmap(lambda a: jax.lax.psum(a, "x"), m2,
                              P("x", "y"), P(None, "y")), x44)
  add("shard_map_all_gather", shmap(
      lambda a: jax.lax.all_gather(a, "y", tiled=True), m2, P("x", "y"),
      P("x", None), check_vma=False), x44)
  add("shard_map_ppermute", shmap(
      lambda a: jax.lax.ppermute(a, "x", [(0, 1), (1, 0)]), m2, P("x", "y"),
      P("x", "y")), x44)
  add("shard_map_all_to_all", shmap(
      lambda a: jax.lax.all_to_all(a, "x", 0, 1, tiled=True), m2,
      P("x", None), P(None, "x")), x44)
  add("shard_map_partial_manual", shmap(
      lambda a: jax.lax.psum(a, "x"), m2, P("x"), P(), axis_names={"x"}),
      x44)
  add("shard_map_call", shmap(jax.jit(lambda a: jax.lax.pmax(a, ("x", "y"))),
                              m2, P("x", "y"), P()), x44)
  add("sort_two_results", jax.jit(
      lambda a, b: jax.lax.sort((a, b), num_keys=1),
      in_shardings=(ns(m2, "x"), ns(m2, "x")),
      out_shardings=(ns(m2, "x"), ns(m2, None, "y"))), x44, x44)
  add("optimization_barrier", jax.jit(
      lambda a, b: jax.lax.optimization_barrier(
          (jax.lax.with_sharding_constraint(a, ns(m2, "x")), b))), x44, x44)
  add("while_loop", jax.jit(lambda a: jax.lax.fori_loop(
      0, 3, lambda i, c: jax.lax.with_sharding_constraint(
          c * 2, ns(m2, "y", "x")), a), in_shardings=ns(m2, "x")), x44)
  add("lapack_sharding_rule", jax.jit(
      lambda a: jnp.linalg.cholesky(a @ a.T + 4 * jnp.eye(4)),
      in_shardings=ns(m2)), x44)

  # Host callbacks: multi-result custom calls with a sharding per result on
  # a maximal mesh (not exportable).
  def two_results(a):
    shape = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    r = jax.pure_callback(
        lambda v: (np.asarray(v) * 2, np.asarray(v) + 1), (shape, shape), a)
    return r[0] + r[1]

  add("callback_two_results", jax.jit(two_results,
                                      in_shardings=ns(m2, "x")), x44)
  add("io_callback_token", jax.jit(lambda a: io_callback(
      np.asarray, jax.ShapeDtypeStruct((4, 4), jnp.float32), a,
      ordered=True), in_shardings=ns(m2, "x")), x44)


def _generate() -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.update("jax_use_shardy_partitioner", True)
  out = {}

  def add(name, fn, *args):
    entry = out[name] = {"text": fn.lower(*args).as_text()}
    try:
      exported = jax.export.export(fn)(*args)
    except NotImplementedError:  # host callbacks do not serialize
      return
    entry["export"] = exported.mlir_module()
    entry["artifact"] = base64.b64encode(
        exported.mlir_module_serialized).decode("ascii")

  _build(add)
  return out


@functools.lru_cache(maxsize=None)
def programs() -> dict:
  """name -> {"text", "export", "artifact"} (see the module docstring)."""
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                      f" --xla_force_host_platform_device_count={_DEVICES}")
  env["JAX_PLATFORMS"] = "cpu"
  proc = subprocess.run([sys.executable, "-m", __name__], env=env,
                        capture_output=True, text=True, check=False,
                        cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                            os.path.dirname(os.path.abspath(__file__))))))
  if proc.returncode != 0:
    raise RuntimeError(f"generating the JAX programs failed:\n{proc.stderr}")
  result = json.loads(proc.stdout)
  for entry in result.values():
    if "artifact" in entry:
      entry["artifact"] = base64.b64decode(entry["artifact"])
  return result


if __name__ == "__main__":
  json.dump(_generate(), sys.stdout)
