"""Test helpers for JAX's LAPACK custom calls (lapack_handlers_test,
lapack_emitter_test): HLO text of one call, and random inputs."""

from __future__ import annotations

import numpy as np

HLO_TYPE = {np.float32: "f32", np.float64: "f64", np.complex64: "c64",
            np.complex128: "c128", np.int32: "s32"}
LETTER = {np.float32: "s", np.float64: "d", np.complex64: "c",
          np.complex128: "z"}
TYPES = list(LETTER)


def hlo_shape(dtype, dims) -> str:
  return f"{HLO_TYPE[np.dtype(dtype).type]}[{','.join(map(str, dims))}]"


def custom_call_text(target, operands, results, config="{}") -> str:
  """An HLO module whose root calls `target` on parameters shaped like the
  numpy `operands`; `results` are (dtype, dims) pairs."""
  params = "\n".join(f"  p{i} = {hlo_shape(x.dtype, x.shape)} parameter({i})"
                     for i, x in enumerate(operands))
  shapes = [hlo_shape(dt, dims) for dt, dims in results]
  shape = shapes[0] if len(shapes) == 1 else f"({', '.join(shapes)})"
  args = ", ".join(f"p{i}" for i in range(len(operands)))
  return (f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {shape} "
          f"custom-call({args}), custom_call_target=\"{target}\", "
          f"api_version=API_VERSION_TYPED_FFI, backend_config={config}\n}}")


def rand(dtype, shape, seed=0) -> np.ndarray:
  rng = np.random.default_rng(seed)
  x = rng.standard_normal(shape)
  if np.issubdtype(dtype, np.complexfloating):
    x = x + 1j * rng.standard_normal(shape)
  return x.astype(dtype)


def real_of(dtype):
  return np.dtype(np.dtype(dtype).type(0).real.dtype).type


def ct(x):
  return np.conj(np.swapaxes(x, -1, -2))


def spd(dtype, shape, seed=0) -> np.ndarray:
  """Hermitian positive definite matrices (batched)."""
  a = rand(dtype, shape, seed)
  n = shape[-1]
  return (a @ ct(a) + n * np.eye(n)).astype(dtype)
