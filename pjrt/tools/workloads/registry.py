"""The workload registry.

A workload is a small but real program written the way users write them. Its
definition is a function decorated with `@workload(...)` that returns the
pair `(init, step)`:

  init(seed) -> state            model, parameters, optimizer state, data
  step(state) -> (state, outputs)   one step; outputs is a pytree of arrays

`init` is timed as its own phase. Everything random is derived from `seed`
with JAX's PRNG (or numpy's, seeded), so both platforms see the same data
and the same keys, and random results compare.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

# One module per family; each registers its workloads when imported.
FAMILY_MODULES = (
    "flax_models",
    "optax_steps",
    "equinox_models",
    "keras_models",
    "scientific",
    "random_fft_scipy",
    "linalg",
    "export",
)


@dataclasses.dataclass(frozen=True)
class Workload:
  name: str
  family: str
  dtype: str            # "f32", or "f64" (run with jax_enable_x64)
  build: Callable[[], tuple[Callable[[int], Any], Callable[[Any], Any]]]
  description: str
  module: str


_REGISTRY: dict[str, Workload] = {}
_loaded = False


def workload(family: str, dtype: str = "f32", name: str | None = None):
  """Registers the decorated `build() -> (init, step)` function."""
  if dtype not in ("f32", "f64"):
    raise ValueError(f"dtype must be f32 or f64, not {dtype!r}")

  def decorate(build):
    wl_name = name or build.__name__
    if wl_name in _REGISTRY:
      raise ValueError(f"workload {wl_name!r} registered twice")
    paragraph = (build.__doc__ or "").strip().split("\n\n")[0]
    _REGISTRY[wl_name] = Workload(
        name=wl_name, family=family, dtype=dtype, build=build,
        description=" ".join(paragraph.split()), module=build.__module__)
    return build

  return decorate


def load_all() -> dict[str, Workload]:
  """Imports every family module; returns the registry (definition order)."""
  global _loaded
  if not _loaded:
    for mod in FAMILY_MODULES:
      importlib.import_module(f"{__package__}.{mod}")
    _loaded = True
  return dict(_REGISTRY)


def get(name: str) -> Workload:
  workloads = load_all()
  if name not in workloads:
    raise KeyError(f"no workload named {name!r}; see --list")
  return workloads[name]


def select(only: list[str] | None = None,
           families: list[str] | None = None) -> list[Workload]:
  """The workloads named in `only` (in that order), else all of `families`,
  else all; unknown names raise KeyError."""
  workloads = load_all()
  if only:
    unknown = [n for n in only if n not in workloads]
    if unknown:
      raise KeyError(f"unknown workload(s): {', '.join(unknown)}")
    chosen = [workloads[n] for n in only]
  else:
    chosen = list(workloads.values())
  if families:
    known = {w.family for w in workloads.values()}
    unknown = [f for f in families if f not in known]
    if unknown:
      raise KeyError(f"unknown famil(y/ies): {', '.join(unknown)}; "
                     f"known: {', '.join(sorted(known))}")
    chosen = [w for w in chosen if w.family in families]
  return chosen
