"""Tests for the primitive bytecode encodings."""

import pytest

import support
from stablehlo._src.bytecode import encoding

_VALUES = [0, 1, 127, 128, 255, 16383, 16384, 2**21 - 1, 2**21, 2**35,
           2**49 - 1, 2**56 - 1, 2**56, 2**63, 2**64 - 1]


@pytest.mark.parametrize("value", _VALUES)
def test_varint_round_trip(value):
  e = encoding.Emitter()
  e.varint(value)
  r = encoding.Reader(bytes(e.buf))
  assert r.varint() == value
  assert r.at_end()


def test_varint_known_bytes():
  e = encoding.Emitter()
  e.varint(1)
  e.varint(128)
  e.varint(2**64 - 1)
  assert bytes(e.buf) == b"\x03\x02\x02\x00" + b"\xff" * 8


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 2**40, -2**40,
                                   2**63 - 1, -2**63])
def test_signed_varint_round_trip(value):
  e = encoding.Emitter()
  e.svarint(value)
  assert encoding.Reader(bytes(e.buf)).svarint() == value


def test_zigzag():
  assert [encoding.zigzag_encode(v) for v in (0, -1, 1, -2)] == [0, 1, 2, 3]


@pytest.mark.parametrize("data", [b"", b"\x02", b"\x00\x01\x02", b"\x80"])
def test_truncated_varint_is_data_loss(data):
  with pytest.raises(support.DataLossError, match="offset"):
    encoding.Reader(data).varint()


def test_bytes_past_end():
  r = encoding.Reader(b"abc")
  with pytest.raises(support.DataLossError, match="offset 0"):
    r.bytes(4)


def test_unterminated_string():
  with pytest.raises(support.DataLossError):
    encoding.Reader(b"abc").nul_string()


def test_aligned_section_round_trip():
  body = encoding.Emitter()
  body.align_to(8)
  body.raw(b"payload")
  out = encoding.Emitter()
  out.raw(b"xyz")
  out.section(5, body)
  data = bytes(out.buf)
  assert data[3] == 0x85  # Alignment bit set.
  r = encoding.Reader(data, 3)
  section_id, sub = r.section()
  assert section_id == 5
  assert sub.pos % 8 == 0
  assert sub.bytes(sub.remaining()) == b"payload"


def test_bad_padding_is_data_loss():
  data = bytes([0x85, 0x03, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 1, 2, 3])
  with pytest.raises(support.DataLossError, match="padding"):
    encoding.Reader(data).section()


def test_unknown_section_id():
  with pytest.raises(support.DataLossError, match="unknown section"):
    encoding.Reader(b"\x09\x01").section()
