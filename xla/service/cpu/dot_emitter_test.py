"""Tests for the dot kernel emitter: BLAS and loop kernels against the HLO
evaluator (and numpy / jax), over dimension numbers, layouts and types."""

import ml_dtypes
import numpy as np
import pytest

from xla import primitive_util
from xla.hlo.parser import hlo_parser
from xla.service.cpu import blas
from xla.service.cpu import contraction_testing as ct
from xla.service.cpu import cpu_testing
from xla.service.cpu import dot_emitter

HAS_BLAS = blas.library() is not None


def dot_text(lt, ls, rt, rs, ot, os_, lb=(), rb=(), lc=(), rc=(),
             out_layout=""):
  j = lambda xs: ",".join(str(x) for x in xs)
  return f"""HloModule m
ENTRY e {{
  a = {lt}[{j(ls)}] parameter(0)
  b = {rt}[{j(rs)}] parameter(1)
  ROOT d = {ot}[{j(os_)}]{out_layout} dot(a, b), lhs_batch_dims={{{j(lb)}}}, rhs_batch_dims={{{j(rb)}}}, lhs_contracting_dims={{{j(lc)}}}, rhs_contracting_dims={{{j(rc)}}}
}}"""


def check(text, dtypes, *, rtol=1e-5, atol=1e-5, seed=0, mode=None):
  """Runs the kernel whole and in two parts; compares with the evaluator."""
  module = hlo_parser.parse_and_return_unverified_module(text)
  root = module.entry_computation.root_instruction
  shapes = [tuple(root.operand(i).shape.dimensions) for i in range(2)]
  rng = np.random.default_rng(seed)
  args = [ct.random_array(rng, s, d) for s, d in zip(shapes, dtypes)]
  if mode == "loops":
    with blas.disabled():
      k = ct.Kernel(text)
      assert dot_emitter.describe(k.instr) == "loops"
  else:
    k = ct.Kernel(text)
    if mode is not None and HAS_BLAS:
      assert dot_emitter.describe(k.instr) == mode
  want = ct.evaluate(text, *args)
  for got in (k(*args), k.run_split(*args)):
    assert got.shape == want.shape
    if got.dtype.kind in "iub":
      np.testing.assert_array_equal(got, want)
    else:
      np.testing.assert_allclose(got.astype(np.complex128 if got.dtype.kind ==
                                            "c" else np.float64),
                                 want.astype(got.dtype).astype(
                                     np.complex128 if got.dtype.kind == "c"
                                     else np.float64), rtol=rtol, atol=atol)
  return k, args, want


# (lhs shape, rhs shape, out shape, lb, rb, lc, rc, expected kernel w/ BLAS)
DNUMS = {
    "mm": ((16, 20), (20, 24), (16, 24), (), (), (1,), (0,), "blas"),
    "lhs_t": ((20, 16), (20, 24), (16, 24), (), (), (0,), (0,), "blas"),
    "rhs_t": ((16, 20), (24, 20), (16, 24), (), (), (1,), (1,), "blas"),
    "both_t": ((20, 16), (24, 20), (16, 24), (), (), (0,), (1,), "blas"),
    "batch_front": ((3, 16, 20), (3, 20, 24), (3, 16, 24), (0,), (0,), (2,),
                    (1,), "blas"),
    "batch_mid": ((16, 3, 20), (20, 3, 24), (3, 16, 24), (1,), (1,), (2,),
                  (0,), "blas"),
    "batch_last": ((16, 20, 3), (20, 24, 3), (3, 16, 24), (2,), (2,), (1,),
                   (0,), "loops"),
    "two_batch": ((2, 16, 3, 20), (3, 2, 20, 24), (2, 3, 16, 24), (0, 2),
                  (1, 0), (3,), (2,), "blas"),
    "two_k_same_order": ((16, 4, 5), (4, 5, 24), (16, 24), (), (), (1, 2),
                         (0, 1), "blas"),
    "two_k_swapped": ((16, 4, 20), (20, 4, 24), (16, 24), (), (), (1, 2),
                      (1, 0), "blas"),
    "split_m": ((4, 20, 12), (20, 24), (4, 12, 24), (), (), (1,), (0,),
                "blas"),
    "two_free_each": ((4, 6, 20), (20, 3, 8), (4, 6, 3, 8), (), (), (2,),
                      (0,), "blas"),
    "vec_mat": ((64,), (64, 80), (80,), (), (), (0,), (0,), "blas"),
    "mat_vec": ((80, 64), (64,), (80,), (), (), (1,), (0,), "blas"),
    "mat_vec_t": ((64, 80), (64,), (80,), (), (), (0,), (0,), "blas"),
    "vec_vec": ((5000,), (5000,), (), (), (), (0,), (0,), "blas"),
    "outer": ((70,), (80,), (70, 80), (), (), (), (), "blas"),
    "batch_vec": ((3, 64), (3, 64, 80), (3, 80), (0,), (0,), (1,), (1,),
                  "blas"),
    "size_one": ((1, 16, 1, 20), (20, 1, 24), (1, 16, 1, 1, 24), (), (), (3,),
                 (0,), "blas"),
    "small": ((2, 3), (3, 4), (2, 4), (), (), (1,), (0,), "loops"),
}


@pytest.mark.parametrize("name", sorted(DNUMS))
@pytest.mark.parametrize("mode", ["auto", "loops"])
def test_dimension_numbers_f32(name, mode):
  ls, rs, os_, lb, rb, lc, rc, expect = DNUMS[name]
  text = dot_text("f32", ls, "f32", rs, "f32", os_, lb, rb, lc, rc)
  check(text, (np.float32, np.float32), rtol=2e-5, atol=2e-4,
        mode=expect if mode == "auto" else "loops")


def test_column_major_output_uses_swapped_gemm():
  text = dot_text("f32", (16, 20), "f32", (20, 24), "f32", (16, 24), (), (),
                  (1,), (0,), out_layout="{0,1}")
  module = hlo_parser.parse_and_return_unverified_module(text)
  dims = dot_emitter.simplify(dot_emitter.dot_dims(
      module.entry_computation.root_instruction))
  choice = dot_emitter.choose_gemm(dims)
  assert choice is not None and choice.plan.swapped
  rng = np.random.default_rng(1)
  a = rng.standard_normal((16, 20)).astype(np.float32)
  b = rng.standard_normal((20, 24)).astype(np.float32)
  for disabled in (False, True):
    if disabled:  # loop kernel: J is the M dim (contiguous in the output)
      with blas.disabled():
        k = ct.Kernel(text)
    else:
      k = ct.Kernel(text)
    # The kernel writes the {0,1} layout: read the buffer column-major.
    out = k(a, b)
    got = out.reshape(-1).reshape((24, 16)).T
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)


def test_non_default_operand_layout():
  # lhs stored column-major: element (i, j) at j * 16 + i.
  text = """HloModule m
ENTRY e {
  a = f32[16,20]{0,1} parameter(0)
  b = f32[20,24] parameter(1)
  ROOT d = f32[16,24] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
  rng = np.random.default_rng(2)
  a = rng.standard_normal((16, 20)).astype(np.float32)
  b = rng.standard_normal((20, 24)).astype(np.float32)
  for disabled in (False, True):
    if disabled:
      with blas.disabled():
        k = ct.Kernel(text)
    else:
      k = ct.Kernel(text)
    got = k(np.ascontiguousarray(a.T), b)  # the {0,1} buffer of `a`
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("ty", ["f64", "c64", "c128"])
@pytest.mark.parametrize("mode", ["auto", "loops"])
def test_blas_types(ty, mode):
  dt = primitive_util.numpy_dtype(primitive_util.from_name(ty))
  text = dot_text(ty, (3, 16, 20), ty, (3, 24, 20), ty, (3, 16, 24), (0,),
                  (0,), (2,), (2,))
  tol = 1e-12 if ty in ("f64", "c128") else 1e-4
  check(text, (dt, dt), rtol=tol, atol=tol,
        mode="blas" if mode == "auto" else "loops")


INT_CASES = [
    ("s8", "s8", "s32"),
    ("s8", "s8", "s8"),
    ("u8", "u8", "u32"),
    ("u8", "s8", "s16"),
    ("s16", "s16", "s16"),
    ("s32", "s32", "s32"),
    ("s64", "s64", "s64"),
    ("u32", "u32", "u32"),
    ("u64", "u64", "u64"),
    ("s4", "s4", "s4"),
    ("u4", "u4", "u4"),
    ("s4", "s4", "s32"),
    ("pred", "pred", "pred"),
]


@pytest.mark.parametrize("lt,rt,ot", INT_CASES)
@pytest.mark.parametrize("dn", ["rhs_t", "mat_vec"])  # + the wide-rows test
def test_integer_and_pred(lt, rt, ot, dn):
  ls, rs, os_, lb, rb, lc, rc, _ = DNUMS[dn]
  text = dot_text(lt, ls, rt, rs, ot, os_, lb, rb, lc, rc)
  pt = lambda n: primitive_util.numpy_dtype(primitive_util.from_name(n))
  check(text, (pt(lt), pt(rt)), mode="loops")


@pytest.mark.parametrize("lt,ot", [("s8", "s32"), ("u8", "u8"), ("s16", "s16"),
                                   ("s64", "s64"), ("pred", "pred"),
                                   ("s4", "s4"), ("bf16", "bf16"),
                                   ("f16", "f16"), ("f32", "f32"),
                                   ("f64", "f64")])
@pytest.mark.parametrize("dn", ["mm", "lhs_t", "batch_mid"])
def test_wide_rows_vector_tiles_and_tails(lt, ot, dn):
  # J = 70 (or 140) elements: full vector tiles plus a scalar tail, for
  # every accumulator width; M = 13 rows: a partial row block.
  shapes = {
      "mm": ((13, 33), (33, 70), (13, 70), (), (), (1,), (0,)),
      "lhs_t": ((33, 13), (33, 140), (13, 140), (), (), (0,), (0,)),
      "batch_mid": ((13, 2, 33), (33, 2, 70), (2, 13, 70), (1,), (1,), (2,),
                    (0,)),
  }
  ls, rs, os_, lb, rb, lc, rc = shapes[dn]
  text = dot_text(lt, ls, lt, rs, ot, os_, lb, rb, lc, rc)
  dt = primitive_util.numpy_dtype(primitive_util.from_name(lt))
  tol = 2e-2 if lt in ("bf16", "f16") else 1e-4
  check(text, (dt, dt), rtol=tol, atol=tol, mode="loops")


def test_integer_wraparound():
  text = dot_text("s32", (2, 3), "s32", (3, 2), "s32", (2, 2), (), (), (1,),
                  (0,))
  a = np.full((2, 3), 2**30, np.int32)
  b = np.array([[3, 1], [1, 1], [1, -5]], np.int32)
  got = ct.Kernel(text)(a, b)
  want = ((a.astype(np.int64) @ b.astype(np.int64)) & 0xFFFFFFFF).astype(
      np.uint32).view(np.int32)
  np.testing.assert_array_equal(got, want)
  # s8 x s8 -> s8 wraps each partial sum modulo 256.
  text8 = dot_text("s8", (1, 4), "s8", (4, 1), "s8", (1, 1), (), (), (1,),
                   (0,))
  a8 = np.array([[100, 100, 100, -7]], np.int8)
  b8 = np.array([[2], [1], [1], [3]], np.int8)
  got8 = ct.Kernel(text8)(a8, b8)
  assert got8[0, 0] == np.int8(((400 - 21 + 128) % 256) - 128)


@pytest.mark.parametrize("ty,out", [("f16", "f16"), ("bf16", "bf16"),
                                    ("f16", "f32"), ("bf16", "f32"),
                                    ("s8", "f32"), ("f32", "f64")])
@pytest.mark.parametrize("dn", ["lhs_t", "batch_front", "vec_vec"])
def test_low_precision_accumulates_in_f32(ty, out, dn):
  ls, rs, os_, lb, rb, lc, rc, _ = DNUMS[dn]
  text = dot_text(ty, ls, ty, rs, out, os_, lb, rb, lc, rc)
  dt = primitive_util.numpy_dtype(primitive_util.from_name(ty))
  k, args, want = check(text, (dt, dt), rtol=1e-2, atol=1e-2)
  if out in ("f16", "bf16"):
    # Accumulating in f32 and rounding once: equal to the f64 sum rounded,
    # up to one ulp of the result type.
    got = k(*args)
    ref = want.astype(np.float64)
    ulp = np.abs(np.spacing(want.astype(ml_dtypes.bfloat16 if out == "bf16"
                                        else np.float16)).astype(np.float64))
    assert np.all(np.abs(got.astype(np.float64) - ref) <= ulp + 1e-6)


def test_f16_long_sum_does_not_lose_precision():
  # 4096 ones: an f16 accumulator would stop at 2048.
  n = 4096
  text = dot_text("f16", (n,), "f16", (n,), "f16", (), (), (), (0,), (0,))
  got = ct.Kernel(text)(np.ones(n, np.float16), np.ones(n, np.float16))
  assert float(got) == 4096.0
  text = dot_text("bf16", (n,), "bf16", (n,), "bf16", (), (), (), (0,), (0,))
  ones = np.ones(n, ml_dtypes.bfloat16)
  got = ct.Kernel(text)(ones, ones)
  assert float(got) == 4096.0


@pytest.mark.parametrize("mode", ["auto", "loops"])
def test_empty_dims(mode):
  cases = [
      ((0, 20), (20, 24), (0, 24), (1,), (0,)),
      ((16, 0), (0, 24), (16, 24), (1,), (0,)),  # K = 0: zeros
      ((3, 0), (0,), (3,), (1,), (0,)),
  ]
  for ls, rs, os_, lc, rc in cases:
    text = dot_text("f32", ls, "f32", rs, "f32", os_, (), (), lc, rc)
    if mode == "loops":
      with blas.disabled():
        k = ct.Kernel(text)
    else:
      k = ct.Kernel(text)
    got = k(np.zeros(ls, np.float32), np.zeros(rs, np.float32))
    assert got.shape == os_
    np.testing.assert_array_equal(got, np.zeros(os_, np.float32))


def test_nan_and_inf_propagate():
  text = dot_text("f32", (16, 20), "f32", (20, 24), "f32", (16, 24), (), (),
                  (1,), (0,))
  a = np.ones((16, 20), np.float32)
  b = np.ones((20, 24), np.float32)
  a[3, 5] = np.nan
  b[0, 7] = np.inf
  for disabled in (False, True):
    if disabled:
      with blas.disabled():
        k = ct.Kernel(text)
    else:
      k = ct.Kernel(text)
    got = k(a, b)
    want = ct.evaluate(text, a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


def test_partitions_cover_extent_exactly():
  text = dot_text("s32", (5, 7, 9), "s32", (5, 9, 11), "s32", (5, 7, 11),
                  (0,), (0,), (2,), (1,))
  rng = np.random.default_rng(3)
  a = rng.integers(-50, 50, (5, 7, 9)).astype(np.int32)
  b = rng.integers(-50, 50, (5, 9, 11)).astype(np.int32)
  k = ct.Kernel(text)
  e = k.spec.parallel_extent
  assert e > 1
  want = np.einsum("bij,bjk->bik", a, b)
  parts = [(i, i + 1) for i in range(e)][::-1]
  np.testing.assert_array_equal(k(a, b, parts=parts), want)
  # A part writes only its own rows: running half leaves the rest poisoned.
  half = k(a, b, parts=[(0, e // 2)])
  assert np.any(half != want)


def test_matches_numpy_and_jax():
  jax = pytest.importorskip("jax")
  jnp = jax.numpy
  text = dot_text("f32", (4, 12, 30), "f32", (30, 4, 20), "f32", (4, 12, 20),
                  (0,), (1,), (2,), (0,))
  rng = np.random.default_rng(4)
  a = rng.standard_normal((4, 12, 30)).astype(np.float32)
  b = rng.standard_normal((30, 4, 20)).astype(np.float32)
  got = ct.Kernel(text)(a, b)
  np.testing.assert_allclose(got, np.einsum("bik,kbj->bij", a, b), rtol=1e-5,
                             atol=1e-4)
  want = jax.lax.dot_general(jnp.asarray(a), jnp.asarray(b),
                             (((2,), (0,)), ((0,), (1,))))
  np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("ls,rs,os_,lb,rb,lc,rc,nblocks", [
    ((200, 96), (96, 80), (200, 80), (), (), (1,), (0,), 4),  # split M
    ((96,), (96, 300), (300,), (), (), (0,), (0,), 5),  # split N
    ((3, 130, 40), (3, 40, 50), (3, 130, 50), (0,), (0,), (2,), (1,), 9),
])
def test_blas_row_blocks_partition(ls, rs, os_, lb, rb, lc, rc, nblocks):
  """Parts are blocks of SPLIT_BLOCK rows of each gemm; any grouping of
  parts (spanning blocks and batch entries) computes the same result."""
  text = dot_text("f32", ls, "f32", rs, "f32", os_, lb, rb, lc, rc)
  k = ct.Kernel(text)
  if not HAS_BLAS:
    pytest.skip("no BLAS")
  assert dot_emitter.describe(k.instr) == "blas"
  e = k.spec.parallel_extent
  assert e == nblocks
  rng = np.random.default_rng(5)
  a = rng.standard_normal(ls).astype(np.float32)
  b = rng.standard_normal(rs).astype(np.float32)
  want = ct.evaluate(text, a, b)
  groupings = [[(0, e)], [(i, i + 1) for i in range(e)][::-1],
               [(e // 2, e), (1, e // 2), (0, 1)]]
  for parts in groupings:
    np.testing.assert_allclose(k(a, b, parts=parts), want, rtol=1e-4,
                               atol=1e-3)
  # A part writes only its own rows.
  assert np.isnan(k(a, b, parts=[(0, 1)])).any()


@pytest.mark.skipif(not HAS_BLAS, reason="no BLAS found")
def test_blas_dot_loads_from_the_disk_cache_in_a_new_process(tmp_path):
  # A BLAS kernel calls a library routine; a process that loads the
  # program from the disk cache emits no dot, and must still find it.
  hlo = """HloModule m
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  ROOT d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
  outs = cpu_testing.compile_in_new_processes(
      hlo, tmp_path,
      "x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096\n"
      "args = [x, x.T]",
      "np.allclose(got, args[0] @ args[1], rtol=1e-4)")
  assert outs == [["miss", "True"], ["disk", "True"]]


@pytest.mark.skipif(not HAS_BLAS, reason="no BLAS found")
def test_a_program_with_a_blas_dot_holds_openblas_at_one_thread():
  # Its kernels call BLAS through a library routine; the executable must
  # still see that it uses BLAS, or OpenBLAS's own threads fight the
  # runtime's (a flax GPT step ran 1.3x slower).
  from xla.service.cpu import cpu_compiler  # pylint: disable=g-import-not-at-top
  module = hlo_parser.parse_and_return_unverified_module("""
HloModule m
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  ROOT d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
  exe = cpu_compiler.compile(module)
  assert blas.uses_blas(exe.plan["externals"])
