"""PJRT_Buffer_MemoryLayout: reading layouts, and bytes in a given layout.

A buffer's data is held logically (a C-contiguous numpy array); a layout
only matters where bytes cross the C API (host buffers, raw copies). Dense
layouts are supported: a minor-to-major permutation without tiles, or byte
strides for host buffers. Tiled layouts are UNIMPLEMENTED.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import support
from pjrt._src import abi
from pjrt._src.plugin import cabi


def default_minor_to_major(rank: int) -> tuple[int, ...]:
  return tuple(range(rank - 1, -1, -1))


def _check_size(layout: Any) -> None:
  if layout.struct_size < abi.PJRT_Buffer_MemoryLayout.STRUCT_SIZE:
    raise support.InvalidArgumentError(
        f"PJRT_Buffer_MemoryLayout.struct_size is {layout.struct_size}, "
        f"expected at least {abi.PJRT_Buffer_MemoryLayout.STRUCT_SIZE}")


def _permutation(values: tuple[int, ...], rank: int) -> tuple[int, ...]:
  if sorted(values) != list(range(rank)):
    raise support.InvalidArgumentError(
        f"minor_to_major {list(values)} is not a permutation of the {rank} "
        "dimensions")
  return values


def read(layout: Any, rank: int) -> tuple[str, tuple[int, ...]]:
  """("minor_to_major", perm) or ("strides", byte strides) of a layout."""
  _check_size(layout)
  if layout.type == abi.MemoryLayoutType.TILED:
    tiled = layout.tiled
    if tiled.num_tiles:
      raise support.UnimplementedError(
          "tiled memory layouts are not supported by the openxla_cpu plugin "
          "(use a dense minor_to_major layout)")
    values = cabi.int64s(tiled.minor_to_major, tiled.minor_to_major_size,
                         "minor_to_major")
    return "minor_to_major", _permutation(values, rank)
  if layout.type == abi.MemoryLayoutType.STRIDES:
    strides = layout.strides
    values = cabi.int64s(strides.byte_strides, strides.num_byte_strides,
                         "byte_strides")
    if len(values) != rank:
      raise support.InvalidArgumentError(
          f"{len(values)} byte strides for a rank-{rank} array")
    return "strides", values
  raise support.InvalidArgumentError(
      f"unknown PJRT_Buffer_MemoryLayout_Type {layout.type}")


def minor_to_major(layout: Any, rank: int) -> tuple[int, ...]:
  """The minor-to-major order of a device layout (strides: UNIMPLEMENTED)."""
  kind, values = read(layout, rank)
  if kind != "minor_to_major":
    raise support.UnimplementedError(
        "a device layout given as byte strides is not supported; give a "
        "minor_to_major layout")
  return values


def optional_minor_to_major(layout_pointer: Any,
                            rank: int) -> Optional[tuple[int, ...]]:
  """minor_to_major of a `PJRT_Buffer_MemoryLayout*` (None when NULL)."""
  if not layout_pointer:
    return None
  return minor_to_major(layout_pointer.contents, rank)


def physical(array: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
  """`array`'s elements in the physical order of minor_to_major `order`."""
  if order == default_minor_to_major(array.ndim):
    return _contiguous(array)
  return _contiguous(np.transpose(array, tuple(reversed(order))))


def from_physical(data: np.ndarray, shape: tuple[int, ...],
                  order: tuple[int, ...]) -> np.ndarray:
  """Inverse of `physical`: logical array from physically ordered data."""
  if order == default_minor_to_major(len(shape)):
    return _contiguous(data.reshape(shape))
  axes = tuple(reversed(order))
  physical_shape = tuple(shape[a] for a in axes)
  return _contiguous(
      np.transpose(data.reshape(physical_shape), np.argsort(axes)))


def strided_size(shape: tuple[int, ...], strides: tuple[int, ...],
                 itemsize: int) -> int:
  """Bytes a strided host buffer spans (0 for an empty array)."""
  if any(d == 0 for d in shape):
    return 0
  low = sum(min(0, s * (d - 1)) for s, d in zip(strides, shape))
  high = sum(max(0, s * (d - 1)) for s, d in zip(strides, shape))
  return high - low + itemsize


def _contiguous(array) -> np.ndarray:
  array = np.asarray(array)
  return array if array.flags.c_contiguous else np.array(array, order="C")
