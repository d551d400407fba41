"""Tests of externalized constants (sidecar files)."""

import hashlib
import json
import struct

import numpy as np
import pytest

import support
from stablehlo._src.interpreter import Interpreter
from stablehlo._src.text import parser
from stablehlo._src.vhlo import extern_constants as ec
from stablehlo._src.vhlo import portable

_W = (np.arange(64 * 32, dtype=np.float32).reshape(64, 32) - 1000) / 7
_V = np.arange(32, dtype=np.int32) * 3 - 5


def _dense(arr):
  return "dense<" + repr(arr.tolist()) + ">"


_TEXT = f"""func.func @main(%x: tensor<64xf32>) -> (tensor<32xf32>, tensor<32xi32>) {{
  %w = stablehlo.constant {_dense(_W)} : tensor<64x32xf32>
  %w2 = stablehlo.constant {_dense(_W)} : tensor<64x32xf32>
  %v = stablehlo.constant {_dense(_V)} : tensor<32xi32>
  %b = stablehlo.constant dense<1.0> : tensor<32xf32>
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [0] x [0] : (tensor<64xf32>, tensor<64x32xf32>) -> tensor<32xf32>
  %1 = stablehlo.dot_general %x, %w2, contracting_dims = [0] x [0] : (tensor<64xf32>, tensor<64x32xf32>) -> tensor<32xf32>
  %2 = stablehlo.add %0, %1 : tensor<32xf32>
  %3 = stablehlo.add %2, %b : tensor<32xf32>
  func.return %3, %v : tensor<32xf32>, tensor<32xi32>
}}"""


@pytest.fixture(name="module")
def _module():
  return parser.parse_module(_TEXT)


def _serialize(module, path, threshold=1024):
  return portable.serialize_portable_artifact(
      module, "1.15.0", externalize_threshold_bytes=threshold,
      sidecar_path=path)


def _index(path):
  data = open(path, "rb").read()
  magic, fmt, align, count, off, size = struct.unpack_from("<8sIIQQQ", data)
  assert (magic, fmt, align) == (b"SHLOEXT\0", 1, 64)
  index = json.loads(data[off:off + size])
  assert len(index) == count and off + size == len(data)
  return data, index


def test_round_trip_runs_the_same(module, tmp_path):
  path = tmp_path / "m.ext"
  data = _serialize(module, path)
  plain = portable.serialize_portable_artifact(module, "1.15.0")
  # The 8 KiB weights (stored once: equal attributes are uniqued) left.
  assert len(data) < len(plain) - 7900
  back = portable.deserialize_portable_artifact(data, path)
  x = np.linspace(-1, 1, 64).astype(np.float32)
  got = Interpreter(back).run("main", [x])
  want = Interpreter(module).run("main", [x])
  np.testing.assert_array_equal(got[0], want[0])
  np.testing.assert_array_equal(got[1], _V)
  np.testing.assert_allclose(got[0], 2 * (x @ _W) + 1, rtol=1e-5)
  # Reloaded constants serialize exactly as the originals.
  assert portable.serialize_portable_artifact(back, "1.15.0") == plain
  assert portable.deserialize_portable_artifact(data, path,
                                               verify_hashes=False)


def test_sidecar_layout_dedup_and_alignment(module, tmp_path):
  path = tmp_path / "m.ext"
  _serialize(module, path)
  raw, index = _index(path)
  # The two equal weights share one blob; the 128-byte vector stays inline.
  blob = _W.astype("<f4").tobytes()
  assert len(index) == 1
  (entry,) = index
  assert entry["sha256"] == hashlib.sha256(blob).hexdigest()
  assert entry["name"] == "sha256-" + entry["sha256"]
  assert entry["offset"] % 64 == 0 and entry["size"] == len(blob)
  assert raw[entry["offset"]:entry["offset"] + entry["size"]] == blob


def test_threshold(module, tmp_path):
  # 128 bytes (the i32 vector) is not above a 128-byte threshold.
  _serialize(module, tmp_path / "a.ext", threshold=128)
  assert len(_index(tmp_path / "a.ext")[1]) == 1
  _serialize(module, tmp_path / "b.ext", threshold=127)
  _, index = _index(tmp_path / "b.ext")
  assert sorted(e["size"] for e in index) == [128, 64 * 32 * 4]
  assert all(e["offset"] % 64 == 0 for e in index)
  # The splat (4 bytes stored) never goes out, even at threshold 0.
  data = _serialize(module, tmp_path / "c.ext", threshold=0)
  assert len(_index(tmp_path / "c.ext")[1]) == 3
  out = Interpreter(portable.deserialize_portable_artifact(
      data, tmp_path / "c.ext")).run("main", [np.zeros(64, np.float32)])
  np.testing.assert_array_equal(out[0], np.ones(32, np.float32))
  # Above every constant: nothing externalized, a normal artifact.
  data = _serialize(module, tmp_path / "d.ext", threshold=1 << 20)
  assert data == portable.serialize_portable_artifact(module, "1.15.0")


def test_missing_sidecar(module, tmp_path):
  data = _serialize(module, tmp_path / "m.ext")
  with pytest.raises(support.InvalidArgumentError, match="sidecar_path"):
    portable.deserialize_portable_artifact(data)
  with pytest.raises(support.NotFoundError, match="does not exist"):
    portable.deserialize_portable_artifact(data, tmp_path / "nope.ext")


def test_modified_sidecar(module, tmp_path):
  path = tmp_path / "m.ext"
  data = _serialize(module, path)
  raw, (entry,) = _index(path)
  flipped = bytearray(raw)
  flipped[entry["offset"] + 5] ^= 1
  path.write_bytes(bytes(flipped))
  with pytest.raises(support.DataLossError, match="sha256"):
    portable.deserialize_portable_artifact(data, path)
  # Without verification the flipped byte is (knowingly) accepted.
  portable.deserialize_portable_artifact(data, path, verify_hashes=False)


def test_other_sidecar_and_size_mismatch(module, tmp_path):
  data = _serialize(module, tmp_path / "m.ext")
  ec.write_sidecar(tmp_path / "other.ext", [b"x" * 5000])
  with pytest.raises(support.DataLossError, match="no constant"):
    portable.deserialize_portable_artifact(data, tmp_path / "other.ext")
  raw, (entry,) = _index(tmp_path / "m.ext")
  header = struct.unpack_from("<8sIIQQQ", raw)
  entry = dict(entry, size=entry["size"] - 4)
  index = json.dumps([entry]).encode()
  bad = raw[:header[4]] + index
  bad = struct.pack("<8sIIQQQ", *header[:5], len(index)) + bad[40:]
  (tmp_path / "bad.ext").write_bytes(bad)
  with pytest.raises(support.DataLossError, match="expects"):
    portable.deserialize_portable_artifact(data, tmp_path / "bad.ext")
  (tmp_path / "junk.ext").write_bytes(b"\0" * 100)
  with pytest.raises(support.DataLossError, match="magic"):
    portable.deserialize_portable_artifact(data, tmp_path / "junk.ext")


def test_record_and_argument_checks(module, tmp_path):
  rec = {"file": "a.ext", "sha256": "ab", "offset": 64, "size": 3}
  assert ec.parse_record(ec.format_record(rec)) == rec
  with pytest.raises(support.DataLossError):
    ec.parse_record("other;file=a")
  with pytest.raises(support.InvalidArgumentError, match="go together"):
    portable.serialize_portable_artifact(module, "1.15.0",
                                         externalize_threshold_bytes=4)
  with pytest.raises(support.InvalidArgumentError, match="threshold"):
    _serialize(module, tmp_path / "m.ext", threshold=-1)
