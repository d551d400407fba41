"""Tests of the recycling output-block allocator."""

import gc

import numpy as np
import pytest

from xla.service.cpu import buffer_pool

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _fresh_pool():
  buffer_pool.clear()
  limit = buffer_pool.max_cached_bytes()
  yield
  buffer_pool.set_max_cached_bytes(limit)
  buffer_pool.clear()


def test_small_blocks_are_plain_and_aligned():
  block, address = buffer_pool.block(1000)
  assert block.nbytes == 1000 and address % buffer_pool.ALIGNMENT == 0
  assert block.__array_interface__["data"][0] == address
  del block
  gc.collect()
  assert buffer_pool.cached_bytes() == 0


def test_a_freed_block_is_reused_once_its_last_view_dies():
  block, address = buffer_pool.block(2 * MIB)
  assert address % buffer_pool.ALIGNMENT == 0
  view = np.ndarray((4,), np.float32, block, 64)
  view[:] = [1, 2, 3, 4]  # writable
  del block
  # A view still holds the block: a new request gets other memory.
  other, other_address = buffer_pool.block(2 * MIB)
  assert other_address != address
  assert buffer_pool.cached_bytes() == 0
  del view
  assert buffer_pool.cached_bytes() == 2 * MIB
  again, again_address = buffer_pool.block(2 * MIB)
  assert again_address == address
  assert buffer_pool.cached_bytes() == 0
  # Another size does not take it.
  del again
  _, fourth = buffer_pool.block(3 * MIB)
  assert fourth != address
  assert buffer_pool.cached_bytes() == 2 * MIB
  del other


def test_cap_on_cached_bytes():
  buffer_pool.set_max_cached_bytes(3 * MIB)
  blocks = [buffer_pool.block(2 * MIB)[0] for _ in range(3)]
  del blocks
  assert buffer_pool.cached_bytes() == 2 * MIB  # one fits under the cap
  buffer_pool.set_max_cached_bytes(0)
  assert buffer_pool.cached_bytes() == 0
  block, _ = buffer_pool.block(2 * MIB)  # pooling off: a plain array
  del block
  assert buffer_pool.cached_bytes() == 0


def test_executable_outputs_survive_reuse():
  """Outputs handed out keep their values while later calls reuse freed
  blocks (a wrong lease lifetime would let a later call overwrite them)."""
  from xla.hlo.parser import hlo_parser  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import cpu_compiler  # pylint: disable=g-import-not-at-top
  module = hlo_parser.parse_and_return_verified_module("""
HloModule m
ENTRY e {
  x = f32[512,1024] parameter(0)
  c = f32[] constant(2)
  b = f32[512,1024] broadcast(c), dimensions={}
  ROOT m = f32[512,1024] multiply(x, b)
}""")
  exe = cpu_compiler.compile(module)
  kept = []
  for i in range(4):
    x = np.full((512, 1024), i, np.float32)
    out = exe.execute([x])[0]
    if i % 2 == 0:
      kept.append((i, out))
    del out  # odd calls free their block for the next call
  for i, out in kept:
    np.testing.assert_array_equal(out, np.full((512, 1024), 2 * i,
                                                np.float32))
