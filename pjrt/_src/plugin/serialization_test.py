"""Tests of serialization.py: the serialized executable format."""

import hashlib
import struct

import pytest

import support
from pjrt._src.plugin import serialization

_EXECUTABLE = serialization.SerializedExecutable(
    code=b"ML\xefR\x00program bytes", format="mlir",
    options=b"\x1a\x02\x20\x01",
    name="jit_f", backend="cpu")


def test_round_trip():
  data = serialization.serialize(_EXECUTABLE)
  assert data.startswith(serialization.MAGIC)
  assert serialization.deserialize(data) == _EXECUTABLE


def test_layout():
  data = serialization.serialize(_EXECUTABLE)
  version, header_size = struct.unpack_from("<II", data, 8)
  assert version == serialization.FORMAT_VERSION
  assert data[-32:] == hashlib.sha256(data[:-32]).digest()
  body = data[16 + header_size:-32]
  assert body == _EXECUTABLE.code + _EXECUTABLE.options


def test_every_flipped_byte_is_detected():
  data = bytearray(serialization.serialize(_EXECUTABLE))
  for i in range(len(data)):
    corrupt = bytearray(data)
    corrupt[i] ^= 0x40
    with pytest.raises((support.DataLossError, support.InvalidArgumentError)):
      serialization.deserialize(bytes(corrupt))


@pytest.mark.parametrize("cut", [1, 10, 33, 60])
def test_truncation_is_data_loss(cut):
  data = serialization.serialize(_EXECUTABLE)
  with pytest.raises(support.DataLossError):
    serialization.deserialize(data[:-cut])


def test_foreign_bytes_are_invalid_argument():
  with pytest.raises(support.InvalidArgumentError, match="magic"):
    serialization.deserialize(b"not an executable at all")


def test_other_version_is_invalid_argument():
  data = bytearray(serialization.serialize(_EXECUTABLE))
  struct.pack_into("<I", data, 8, serialization.FORMAT_VERSION + 1)
  body = bytes(data[:-32])
  with pytest.raises(support.InvalidArgumentError, match="version"):
    serialization.deserialize(body + hashlib.sha256(body).digest())
