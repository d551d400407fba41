"""LAPACK from the OpenBLAS that numpy ships, called through ctypes.

XLA CPU runs JAX's linear algebra (the `lapack_*_ffi` custom calls) on
LAPACK; so do we. The library is the one `blas.py` finds (numpy's bundled
OpenBLAS, which also carries LAPACK); wheels export its routines as
`scipy_dgetrf_64_` with 64-bit integers, other builds as `dgetrf_` with
32-bit ones. `library()` probes the names it knows.

Calling convention (Fortran, as gfortran compiles it): every argument is
passed by reference, and each CHARACTER argument adds a hidden length
(size_t) after the last argument. `LapackLibrary.call(name, *args)` takes
numpy arrays (passed as their data pointer; they must be Fortran-ordered,
writable and of the routine's type), Python ints (boxed as the interface's
integer), one-letter strings (CHARACTER, whose lengths it appends), floats
or complex numbers (boxed as the array dtype given by `scalar=`) and None
(a null pointer, for arguments LAPACK does not reference).

Why ctypes and not scipy.linalg.lapack: scipy is not a runtime dependency,
and numpy.linalg exposes only a few drivers (no geqp3, gees, gehrd, sytrd,
gtsv, ormqr, ...) without their raw outputs (tau, pivots, info).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
from typing import Optional

import numpy as np

import support

# Element dtype -> LAPACK type letter.
LETTERS = {
    np.dtype(np.float32): "s",
    np.dtype(np.float64): "d",
    np.dtype(np.complex64): "c",
    np.dtype(np.complex128): "z",
}

# (symbol pattern, integer bits of the interface), most specific first.
_NAME_SCHEMES = (
    ("scipy_{}_64_", 64),
    ("{}_64_", 64),
    ("scipy_{}_", 32),
    ("{}_", 32),
)


@dataclasses.dataclass
class LapackLibrary:
  """A loaded LAPACK: its file, symbol pattern and integer width."""
  path: str
  lib: ctypes.CDLL
  scheme: str
  int_bits: int

  def __post_init__(self):
    self.int_dtype = np.dtype(np.int64 if self.int_bits == 64 else np.int32)
    self._int_ctype = (ctypes.c_int64 if self.int_bits == 64
                       else ctypes.c_int32)
    self._fns: dict = {}

  def function(self, name: str):
    """The ctypes function of routine `name` (e.g. "dgetrf")."""
    fn = self._fns.get(name)
    if fn is None:
      symbol = self.scheme.format(name)
      try:
        fn = getattr(self.lib, symbol)
      except AttributeError:
        raise support.UnimplementedError(
            f"LAPACK routine {name} ({symbol}) is not exported by "
            f"{self.path}") from None
      fn.restype = None
      self._fns[name] = fn
    return fn

  def call(self, name: str, *args, scalar=None) -> None:
    """Calls routine `name` with `args` (see the module docstring)."""
    fn = self.function(name)
    c_args = []
    keep = []
    lengths = 0
    for arg in args:
      if arg is None:
        c_args.append(None)
      elif isinstance(arg, np.ndarray):
        c_args.append(ctypes.c_void_p(arg.ctypes.data))
      elif isinstance(arg, str):
        box = ctypes.c_char(arg.encode())
        keep.append(box)
        c_args.append(ctypes.byref(box))
        lengths += 1
      elif isinstance(arg, (bool, np.bool_)):
        raise TypeError(f"LAPACK {name}: bool argument")
      elif isinstance(arg, (int, np.integer)):
        box = self._int_ctype(int(arg))
        keep.append(box)
        c_args.append(ctypes.byref(box))
      elif isinstance(arg, (float, complex, np.floating, np.complexfloating)):
        box = np.array([arg], dtype=scalar)
        keep.append(box)
        c_args.append(ctypes.c_void_p(box.ctypes.data))
      else:
        raise TypeError(f"LAPACK {name}: unsupported argument {arg!r}")
    c_args.extend([ctypes.c_size_t(1)] * lengths)
    fn(*c_args)

  def ints(self, n: int) -> np.ndarray:
    """A zeroed integer array of the interface's width (at least 1 long)."""
    return np.zeros(max(1, int(n)), self.int_dtype)


def _candidate_paths() -> list[str]:
  paths = []
  env = os.environ.get("XLA_CPU_LAPACK_LIBRARY")
  if env:
    paths.append(env)
  # The library the gemm calls use, found the same way.
  from xla.service.cpu import blas  # pylint: disable=g-import-not-at-top
  paths.extend(blas.candidate_paths())
  return paths


def _probe(path: str) -> Optional[LapackLibrary]:
  try:
    lib = ctypes.CDLL(path)
  except OSError:
    return None
  for scheme, bits in _NAME_SCHEMES:
    if all(hasattr(lib, scheme.format(r)) for r in ("dgetrf", "zheevd")):
      return LapackLibrary(path=path, lib=lib, scheme=scheme, int_bits=bits)
  return None


@functools.lru_cache(maxsize=None)
def _find() -> Optional[LapackLibrary]:
  for path in _candidate_paths():
    lib = _probe(path)
    if lib is not None:
      return lib
  return None


def library() -> LapackLibrary:
  """numpy's LAPACK; UnimplementedError when none can be found."""
  lib = _find()
  if lib is None:
    raise support.UnimplementedError(
        "CPU backend: no LAPACK library found (looked for numpy's bundled "
        "OpenBLAS; set XLA_CPU_LAPACK_LIBRARY to a LAPACK shared library)")
  return lib


def available() -> bool:
  return _find() is not None


def letter(dtype) -> str:
  """LAPACK's type letter for `dtype`; UnimplementedError for other types."""
  try:
    return LETTERS[np.dtype(dtype)]
  except KeyError:
    raise support.UnimplementedError(
        f"LAPACK: element type {np.dtype(dtype)} is not supported (only "
        f"f32, f64, c64, c128)") from None
