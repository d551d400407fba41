"""Block transposes: every element lands where numpy's transpose puts it,
for shapes cut by the block edge, batched permutations and every storage
width; kernels that are not such transposes keep the elemental loop."""

import ml_dtypes
import numpy as np
import pytest

from xla.service.cpu import cpu_compiler
from xla.service.cpu import cpu_testing as ct

_TYPES = {
    "f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16,
    "f16": np.float16, "s8": np.int8, "u16": np.uint16, "s64": np.int64,
    "pred": np.bool_,
}


def _shape(ty, dims):
  return f"{ty}[{','.join(map(str, dims))}]"


def _transpose_text(ty, in_dims, perm, fused):
  out_dims = [in_dims[p] for p in perm]
  perm_s = ",".join(map(str, perm))
  if not fused:
    return f"""
HloModule m
ENTRY e {{
  x = {_shape(ty, in_dims)} parameter(0)
  ROOT t = {_shape(ty, out_dims)} transpose(x), dimensions={{{perm_s}}}
}}"""
  return f"""
HloModule m
fused {{
  p = {_shape(ty, in_dims)} parameter(0)
  ROOT t = {_shape(ty, out_dims)} transpose(p), dimensions={{{perm_s}}}
}}
ENTRY e {{
  x = {_shape(ty, in_dims)} parameter(0)
  ROOT f = {_shape(ty, out_dims)} fusion(x), kind=kLoop, calls=fused
}}"""


def _values(ty, dims, seed=0):
  rng = np.random.default_rng(seed)
  dt = _TYPES[ty]
  if ty == "pred":
    return rng.integers(0, 2, dims).astype(np.bool_)
  if np.issubdtype(dt, np.integer):
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, dims, dtype=dt)
  return rng.standard_normal(dims).astype(dt)


def _compile(text, tmp_path=None, key=""):
  module = ct.parse(text)
  opts = cpu_compiler.CpuCompileOptions(threads=2)
  if tmp_path is not None:
    opts = cpu_compiler.CpuCompileOptions(threads=2, dump_to=str(tmp_path),
                                          input_key=key)
  return cpu_compiler.compile(module, opts)


CASES = [
    ("f32", [64, 96], [1, 0]),
    ("f32", [13, 37], [1, 0]),          # both dimensions cut by the edge
    ("f32", [8, 8], [1, 0]),            # one block
    ("f32", [3, 40, 17], [0, 2, 1]),    # batched
    ("f32", [40, 5, 17], [1, 2, 0]),    # columns from the outermost input
    ("f32", [2, 3, 24, 16], [1, 0, 3, 2]),
    ("f32", [9, 12, 3, 33], [2, 0, 3, 1]),
    ("f64", [33, 70], [1, 0]),
    ("bf16", [24, 40], [1, 0]),
    ("f16", [3, 17, 9], [0, 2, 1]),
    ("s8", [31, 64], [1, 0]),
    ("u16", [16, 130], [1, 0]),
    ("s64", [10, 3, 12], [1, 2, 0]),
    ("pred", [20, 11], [1, 0]),
]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("ty,in_dims,perm", CASES)
def test_block_transpose_matches_numpy(ty, in_dims, perm, fused, tmp_path):
  text = _transpose_text(ty, in_dims, perm, fused)
  exe = _compile(text, tmp_path, f"transpose-{ty}-{in_dims}-{perm}-{fused}")
  x = _values(ty, in_dims)
  (got,) = exe.execute([x])
  want = np.transpose(x, perm)
  assert got.dtype == want.dtype and got.shape == want.shape
  np.testing.assert_array_equal(got.view(np.uint8), want.copy().view(np.uint8))
  # The block kernel moved it (a transpose in registers).
  assert "shufflevector" in (tmp_path / "m.ir.ll").read_text()


def test_nan_payloads_keep_their_bits():
  bits = np.arange(0x7FA00000, 0x7FA00000 + 24 * 16, dtype=np.uint32)
  bits[::3] |= 0x80000000
  x = bits.view(np.float32).reshape(24, 16)
  (got,) = _compile(_transpose_text("f32", [24, 16], [1, 0], False)).execute(
      [x])
  np.testing.assert_array_equal(got.view(np.uint32), bits.reshape(24, 16).T)


@pytest.mark.parametrize("ty,in_dims,perm", [
    ("f32", [7, 64], [1, 0]),           # shorter than a block
    ("f32", [16, 4, 24], [1, 0, 2]),    # the contiguous dimension stays
    ("f32", [12, 10, 9], [2, 1, 0]),    # output rows not the input's last
    ("c64", [16, 24], [1, 0]),          # no integer of its width
])
def test_other_transposes_keep_the_elemental_loop(ty, in_dims, perm,
                                                  tmp_path):
  text = _transpose_text(ty, in_dims, perm, False)
  exe = _compile(text, tmp_path, f"elemental-{ty}-{in_dims}-{perm}")
  rng = np.random.default_rng(1)
  x = rng.standard_normal(in_dims).astype(np.float32)
  if ty == "c64":
    x = (x + 1j * rng.standard_normal(in_dims)).astype(np.complex64)
  (got,) = exe.execute([x])
  np.testing.assert_array_equal(got, np.transpose(x, perm))
  assert "shufflevector" not in (tmp_path / "m.ir.ll").read_text()


def test_transpose_feeding_other_ops_matches_evaluator():
  # Transposes inside larger fusions stay on the elemental path.
  ct.run_and_compare("""
HloModule m
ENTRY e {
  x = f32[40,24] parameter(0)
  t = f32[24,40] transpose(x), dimensions={1,0}
  ROOT n = f32[24,40] negate(t)
}""")
