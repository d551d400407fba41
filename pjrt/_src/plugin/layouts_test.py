"""Tests of layouts.py: dense layouts and bytes in physical order."""

import numpy as np
import pytest

import support
from pjrt._src import abi
from pjrt._src.plugin import layouts


def _tiled(minor_to_major, tiles=0):
  layout = abi.make_args(abi.PJRT_Buffer_MemoryLayout)
  layout.type = abi.MemoryLayoutType.TILED
  abi.set_fields(layout.tiled, minor_to_major=list(minor_to_major),
                 minor_to_major_size=len(minor_to_major), num_tiles=tiles)
  return layout


def test_read_minor_to_major():
  assert layouts.read(_tiled([0, 1]), 2) == ("minor_to_major", (0, 1))
  assert layouts.minor_to_major(_tiled([2, 1, 0]), 3) == (2, 1, 0)


def test_bad_permutation_and_tiles():
  with pytest.raises(support.InvalidArgumentError, match="permutation"):
    layouts.read(_tiled([0, 0]), 2)
  with pytest.raises(support.UnimplementedError, match="tiled"):
    layouts.read(_tiled([1, 0], tiles=1), 2)


def test_strides():
  layout = abi.make_args(abi.PJRT_Buffer_MemoryLayout)
  layout.type = abi.MemoryLayoutType.STRIDES
  abi.set_fields(layout.strides, byte_strides=[4, 12], num_byte_strides=2)
  assert layouts.read(layout, 2) == ("strides", (4, 12))
  with pytest.raises(support.UnimplementedError):
    layouts.minor_to_major(layout, 2)


def test_physical_order_is_column_major_for_0_1():
  array = np.arange(6, dtype=np.int32).reshape(2, 3)
  data = layouts.physical(array, (0, 1))
  assert data.tobytes() == np.asfortranarray(array).tobytes(order="A")
  back = layouts.from_physical(data.reshape(-1), (2, 3), (0, 1))
  np.testing.assert_array_equal(back, array)


def test_physical_of_rank_3_permutation():
  array = np.arange(24).reshape(2, 3, 4)
  order = (1, 2, 0)  # dim 1 fastest, then dim 2, dim 0 slowest.
  data = layouts.physical(array, order)
  expected = [array[i, j, k] for i in range(2) for k in range(4)
              for j in range(3)]
  assert list(data.reshape(-1)) == expected
  np.testing.assert_array_equal(
      layouts.from_physical(data.reshape(-1), (2, 3, 4), order), array)


def test_scalars_keep_rank_0():
  assert layouts.physical(np.float32(2.5), ()).shape == ()


def test_strided_size():
  assert layouts.strided_size((2, 3), (12, 4), 4) == 24
  assert layouts.strided_size((2, 3), (-12, 4), 4) == 24
  assert layouts.strided_size((0, 3), (12, 4), 4) == 0
