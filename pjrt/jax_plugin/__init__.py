"""JAX plugin module of our CPU PJRT plugin (entry-point group "jax_plugins").

Installing the openxla-pjrt wheel declares

    [jax_plugins]
    openxla_cpu = pjrt.jax_plugin

JAX imports every module so declared when it first looks for backends and
calls its `initialize()`. Ours hands JAX the plugin's `PJRT_Api` as a
PyCapsule named "pjrt_c_api" (`jax._src.xla_bridge.register_plugin(...,
c_api=capsule)`): the table lives in this process, implemented with ctypes
callbacks, so no shared library is involved.

To keep plain JAX use unaffected by merely installing the wheel, the plugin
registers itself only when asked for: when JAX_PLATFORMS (or the
`jax_platforms` config) names "openxla_cpu", or OPENXLA_CPU_JAX_REGISTER=1;
`register()` does it explicitly. Client options (num_devices, backend) come
from JAX's `jax_pjrt_client_create_options` ("num_devices:2;backend:cpu") or
the environment (see pjrt/_src/plugin/options.py).

Several processes: after `jax.distributed.initialize(...)` every process's
client lists the devices of all of them (pjrt/_src/plugin/multiprocess.py);
collectives between processes run on the cpu backend over MPI, so such
programs need the processes started by an MPI launcher (`mpirun -n 2 python
train.py`, where `jax.distributed.initialize()` finds its settings itself).
"""

from __future__ import annotations

import os

PLATFORM = "openxla_cpu"
REGISTER_ENV = "OPENXLA_CPU_JAX_REGISTER"

# Below JAX's own CPU backend (0): when registered without being named in
# JAX_PLATFORMS, the plugin is available but never the default backend.
UNREQUESTED_PRIORITY = -100

_registered = False


def _platforms_requested() -> list[str]:
  names = os.environ.get("JAX_PLATFORMS", "")
  try:
    from jax._src import config  # pylint: disable=g-import-not-at-top
    names = config.jax_platforms.value or names
  except Exception:  # pylint: disable=broad-except
    pass
  return [n.strip() for n in (names or "").split(",") if n.strip()]


def requested() -> bool:
  """Whether this process asked JAX for our platform."""
  return (PLATFORM in _platforms_requested() or
          os.environ.get(REGISTER_ENV, "") not in ("", "0"))


def register(priority: int | None = None) -> None:
  """Registers the plugin with JAX (once per process)."""
  global _registered
  if _registered:
    return
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  from pjrt._src.plugin import api  # pylint: disable=g-import-not-at-top
  if priority is None:
    priority = 400 if PLATFORM in _platforms_requested() else (
        UNREQUESTED_PRIORITY)
  # options={}, not None: with None, JAX drops the distributed runtime's
  # create options (node_id, num_nodes) and jax_pjrt_client_create_options
  # from a multi-process client.
  xla_bridge.register_plugin(PLATFORM, priority=priority, options={},
                             c_api=api.capsule())
  # JAX's "cpu" lowerings of the linear-algebra primitives (LAPACK custom
  # calls) and of threefry (see lowerings.py).
  from pjrt.jax_plugin import lowerings  # pylint: disable=g-import-not-at-top
  lowerings.register(PLATFORM)
  # Host callbacks (jax.debug.print, pure_callback, io_callback), which
  # JAX lowers for its built-in platforms only (see callbacks.py).
  from pjrt.jax_plugin import callbacks  # pylint: disable=g-import-not-at-top
  callbacks.register(PLATFORM)
  _enable_donation()
  _follow_compilation_cache_dir()
  _registered = True


def _follow_compilation_cache_dir() -> None:
  """Makes JAX's `jax_compilation_cache_dir` the plugin's persistent cache
  of compiled programs.

  JAX uses its own persistent cache only for its built-in platforms (a
  fixed list in jax/_src/compilation_cache.py), so a user who enables it
  would otherwise recompile every program of every run on ours. The
  plugin keeps its own cache (program_cache) in that directory instead.
  JAX's thresholds for what to cache (minimum compile time, entry size)
  do not apply: every program of one device is kept."""
  import jax  # pylint: disable=g-import-not-at-top
  from pjrt._src.plugin import program_cache  # pylint: disable=g-import-not-at-top

  def directory():
    return getattr(jax.config, "jax_compilation_cache_dir", None)

  program_cache.set_directory_provider(directory)


def _enable_donation() -> None:
  """Tells JAX that our platform honours `donate_argnums`.

  JAX keeps a fixed list of platforms that support donation and drops
  donations (with a warning) for any other, so that every optimizer step would
  copy all parameters. The plugin implements donation (PJRT Execute consumes
  donated buffers, and the CPU backend writes aliased results in place)."""
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  platforms = getattr(mlir, "_platforms_with_donation", None)
  if isinstance(platforms, list) and PLATFORM not in platforms:
    platforms.append(PLATFORM)


def initialize() -> None:
  """Called by JAX's plugin discovery."""
  if requested():
    register()
