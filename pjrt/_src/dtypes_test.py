"""Tests of the PJRT_Buffer_Type <-> numpy dtype table."""

import ml_dtypes
import numpy as np
import pytest

import support
from pjrt._src import dtypes
from pjrt._src.abi_types import BufferType


def test_round_trip_of_every_mapped_type():
  for buffer_type, dtype in dtypes.TO_NUMPY.items():
    assert dtypes.buffer_type(dtype) == buffer_type
    assert dtypes.numpy_dtype(buffer_type) == dtype
    assert dtypes.numpy_dtype(int(buffer_type)) == dtype


@pytest.mark.parametrize("dtype,buffer_type", [
    (np.bool_, BufferType.PRED),
    (np.float32, BufferType.F32),
    (np.complex128, BufferType.C128),
    (ml_dtypes.bfloat16, BufferType.BF16),
    (ml_dtypes.float8_e4m3fn, BufferType.F8E4M3FN),
    (ml_dtypes.int4, BufferType.S4),
    ("uint16", BufferType.U16),
])
def test_known_pairs(dtype, buffer_type):
  assert dtypes.buffer_type(dtype) == buffer_type


def test_everything_but_token_and_one_bit_types_is_mapped():
  unmapped = set(BufferType) - set(dtypes.TO_NUMPY)
  assert unmapped == {BufferType.INVALID, BufferType.TOKEN, BufferType.S1,
                      BufferType.U1}


def test_errors():
  with pytest.raises(support.InvalidArgumentError, match="object"):
    dtypes.buffer_type(object)
  with pytest.raises(support.UnimplementedError, match="TOKEN"):
    dtypes.numpy_dtype(BufferType.TOKEN)
  with pytest.raises(support.UnimplementedError, match="77"):
    dtypes.numpy_dtype(77)


def test_a_token_is_stored_in_zero_bytes():
  assert dtypes.storage_dtype(BufferType.TOKEN).itemsize == 0
  assert dtypes.storage_dtype(BufferType.F32) == np.float32
  token = dtypes.token_array()
  assert token.shape == () and token.nbytes == 0
  # No host array converts to a token.
  with pytest.raises(support.InvalidArgumentError):
    dtypes.buffer_type(dtypes.TOKEN_STORAGE)
  with pytest.raises(support.UnimplementedError, match="S1"):
    dtypes.storage_dtype(BufferType.S1)
