"""Python host callbacks as custom calls on the CPU backend.

A frontend that runs in the same process as this backend (JAX's callbacks
through our PJRT plugin: `jax.debug.print`, `jax.debug.callback`,
`jax.pure_callback`, `io_callback`) registers a Python function here and
emits

  custom_call @xla_cpu_python_host_callback(operands...)
      {backend_config = {index = N : ui64}, has_side_effect = ...}

N is the number `register` returned. At run time the thunk calls the
function with the operands as numpy arrays (token operands are skipped) and
writes the arrays it returns to the results (token results are skipped).

N means something only in the process that registered it, so a program
with such a call must not be stored in or loaded from a cache shared
between processes: `calls_host(text)` says whether a program names the
target.
"""

from __future__ import annotations

import itertools
import threading
from typing import Callable

import numpy as np

import support
from xla import primitive_util
from xla.service.cpu import lapack_handlers
from xla.service.spmd import spmd_partitioner

TARGET = "xla_cpu_python_host_callback"
# The same call where JAX asks for it on every device's own shards
# (`jax.debug.callback(..., partitioned=True)`): the SPMD partitioner runs it
# per partition with the operands' local values (see `spmd_partitioner`).
PARTITIONED_TARGET = "xla_cpu_python_partitioned_host_callback"

_LOCK = threading.Lock()
_NEXT = itertools.count(1)
# Strong references: a function lives as long as the process (one per
# lowered call site; the frontend's closures are small).
_CALLBACKS: dict[int, Callable] = {}


def register(fn: Callable) -> int:
  """Keeps `fn` and returns the index a custom call names it by."""
  with _LOCK:
    index = next(_NEXT)
    _CALLBACKS[index] = fn
  return index


def registered(index: int) -> Callable:
  fn = _CALLBACKS.get(index)
  if fn is None:
    raise support.NotFoundError(
        f"{TARGET}: no host callback with index {index} in this process "
        "(a program with host callbacks cannot be reused by another process)")
  return fn


def calls_host(program: bytes | str) -> bool:
  """Whether a serialized or printed program names a host-callback
  target (its name is stored as text in both forms)."""
  for target in (TARGET, PARTITIONED_TARGET):
    if (target.encode() if isinstance(program, bytes) else target) in program:
      return True
  return False


def _results(instr) -> list:
  shape = instr.shape
  leaves = shape.tuple_shapes if shape.is_tuple() else [shape]
  return [(tuple(s.dimensions), s.element_type) for s in leaves
          if s.is_array()]


def _run(instr, operands):
  attrs = lapack_handlers.parse_backend_config(instr.backend_config)
  if "index" not in attrs:
    raise support.InvalidArgumentError(
        f"{TARGET} ({instr.name}): backend_config {instr.backend_config!r} "
        "has no index")
  fn = registered(int(attrs["index"]))
  args = [np.array(o) for o in operands if o is not None]
  values = fn(*args)
  values = list(values) if values is not None else []
  expected = _results(instr)
  if len(values) != len(expected):
    raise support.InvalidArgumentError(
        f"host callback of {instr.name} returned {len(values)} values; the "
        f"program expects {len(expected)}")
  out = []
  for k, (value, (dims, element_type)) in enumerate(zip(values, expected)):
    arr = np.asarray(value)
    dtype = primitive_util.numpy_dtype(element_type)
    if arr.shape != dims or arr.dtype != dtype:
      raise support.InvalidArgumentError(
          f"host callback of {instr.name}: result {k} is {arr.dtype}"
          f"{list(arr.shape)}, the program expects {np.dtype(dtype)}"
          f"{list(dims)}")
    out.append(arr)
  return tuple(out) if out else None


HANDLERS = {TARGET: _run, PARTITIONED_TARGET: _run}

spmd_partitioner.register_per_partition_target(PARTITIONED_TARGET)
