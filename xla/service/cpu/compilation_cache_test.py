"""The CPU compilation cache: memory hits, disk hits, and entries that are
corrupt (truncated, bit-flipped, for another key) being recompiled."""

import os

import numpy as np
import pytest

from xla.service.cpu import compilation_cache as cc
from xla.service.cpu import cpu_compiler
from xla.service.cpu import cpu_testing as ct

TEXT = """
HloModule cached_{tag}
ENTRY e {{
  x = f32[16] parameter(0)
  e = f32[16] exponential(x)
  ROOT n = f32[16] add(e, x)
}}"""

CUSTOM = """
HloModule cached_custom_{tag}
ENTRY e {{
  x = f32[4] parameter(0)
  c = f32[4] custom-call(x), custom_call_target="twice", backend_config="k=2"
  ROOT n = f32[4] negate(c)
}}"""


def _twice(instr, ops):
  assert instr.backend_config == "k=2"
  assert tuple(instr.shape.dimensions) == (4,)
  return ops[0] * 2


def _compile(text, cache_dir=None):
  return cpu_compiler.compile(ct.parse(text), cpu_compiler.CpuCompileOptions(
      threads=1, cache_dir=cache_dir))


def _check(exe):
  x = np.linspace(-1, 1, 16).astype(np.float32)
  (out,) = exe.execute([x])
  np.testing.assert_allclose(out, np.exp(x) + x, rtol=1e-6)


def test_memory_hit(tmp_path):
  text = TEXT.format(tag="mem")
  first = _compile(text)
  second = _compile(text)
  assert first.compile_stats["cache"] == "miss"
  assert second.compile_stats["cache"] == "memory"
  assert first.compile_stats["cache_key"] == second.compile_stats["cache_key"]
  _check(second)


def test_key_depends_on_module_and_options():
  a = cc.fingerprint("m1", "o", "host")
  assert a == cc.fingerprint("m1", "o", "host")
  assert a != cc.fingerprint("m2", "o", "host")
  assert a != cc.fingerprint("m1", "o2", "host")
  assert a != cc.fingerprint("m1", "o", "other-cpu")


def test_disk_hit_after_memory_is_cleared(tmp_path):
  text = TEXT.format(tag="disk")
  first = _compile(text, str(tmp_path))
  assert first.compile_stats["cache"] == "miss"
  files = [p for p in tmp_path.iterdir() if p.suffix == ".xlacpu"]
  assert len(files) == 1
  cc.CACHE.clear()
  second = _compile(text, str(tmp_path))
  assert second.compile_stats["cache"] == "disk"
  _check(second)


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "key"])
def test_corrupt_entry_is_recompiled(tmp_path, damage):
  text = TEXT.format(tag=f"corrupt_{damage}")
  _compile(text, str(tmp_path))
  (path,) = [p for p in tmp_path.iterdir() if p.suffix == ".xlacpu"]
  data = path.read_bytes()
  if damage == "truncate":
    data = data[:len(data) // 2]
  elif damage == "flip":
    i = len(data) - 40  # inside the object code / custom-call part
    data = data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:]
  elif damage == "garbage":
    data = b"not a cache entry"
  else:  # a valid entry stored under another key
    other = _compile(TEXT.format(tag="other_key"), str(tmp_path / "o"))
    (opath,) = [p for p in (tmp_path / "o").iterdir()
                if p.suffix == ".xlacpu"]
    data = opath.read_bytes()
    del other
  path.write_bytes(data)
  cc.CACHE.clear()
  before = cc.CACHE.stats["corrupt"]
  exe = _compile(text, str(tmp_path))
  assert exe.compile_stats["cache"] == "miss"
  assert cc.CACHE.stats["corrupt"] == before + 1
  _check(exe)
  # The recompiled entry was rewritten and is good again.
  cc.CACHE.clear()
  assert _compile(text, str(tmp_path)).compile_stats["cache"] == "disk"


def test_decode_rejects_every_single_byte_flip_in_header_region():
  art = cc.Artifact({"kernels": [], "thunks": []}, b"\x01\x02\x03", [None])
  data = cc._encode("k", art)  # pylint: disable=protected-access
  assert cc._decode(data, "k") is not None  # pylint: disable=protected-access
  for i in range(0, len(data), 7):
    bad = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
    assert cc._decode(bad, "k") is None, i  # pylint: disable=protected-access


def test_custom_call_survives_disk_roundtrip(tmp_path):
  text = CUSTOM.format(tag="rt")
  first = _compile(text, str(tmp_path))
  cc.CACHE.clear()
  second = _compile(text, str(tmp_path))
  assert second.compile_stats["cache"] == "disk"
  x = np.arange(4, dtype=np.float32)
  for exe in (first, second):
    (out,) = exe.execute([x], custom_calls={"twice": _twice})
    np.testing.assert_array_equal(out, -2 * x)


def test_write_is_atomic_no_temp_files_left(tmp_path):
  _compile(TEXT.format(tag="atomic"), str(tmp_path))
  leftovers = [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]
  assert not leftovers
