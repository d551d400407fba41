"""Tests for the shape / data-movement kernels. Expected values come from
per-element loops over the spec formulas or from plain numpy indexing,
never from the kernels' own output."""

import itertools

import ml_dtypes
import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import corpus_testing
from stablehlo._src.ops import registry
from stablehlo._src.ops import verify
import support


def _run(src, *args, name="main"):
  module = text.parse_module(src, "t.mlir")
  verify.verify_module(module)
  return interpreter.Interpreter(module).run(name, list(args))


def _one(src, *args):
  (out,) = _run(src, *args)
  return out


# --- broadcast_in_dim / broadcast ---------------------------------------------


def _broadcast_ref(x, dims, shape):
  """spec formula, element by element."""
  out = np.empty(shape, dtype=x.dtype)
  for idx in itertools.product(*(range(s) for s in shape)):
    src = tuple(0 if x.shape[d] == 1 else idx[dims[d]]
                for d in range(x.ndim))
    out[idx] = x[src]
  return out


def test_broadcast_in_dim_spec_example_unsorted_dims():
  x = np.array([[1, 2, 3]], np.int32)
  out = _one("""
  func.func @main(%x: tensor<1x3xi32>) -> tensor<2x3x2xi32> {
    %0 = stablehlo.broadcast_in_dim %x, dims = [2, 1]
        : (tensor<1x3xi32>) -> tensor<2x3x2xi32>
    return %0 : tensor<2x3x2xi32>
  }""", x)
  assert out.shape == (2, 3, 2) and out.dtype == np.int32
  np.testing.assert_array_equal(out, _broadcast_ref(x, (2, 1), (2, 3, 2)))
  assert out[1, 2, 0] == 3


def test_broadcast_in_dim_transposing_and_expanding():
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  out = _one("""
  func.func @main(%x: tensor<2x3xf32>) -> tensor<3x4x2xf32> {
    %0 = stablehlo.broadcast_in_dim %x, dims = [2, 0]
        : (tensor<2x3xf32>) -> tensor<3x4x2xf32>
    return %0 : tensor<3x4x2xf32>
  }""", x)
  np.testing.assert_array_equal(out, _broadcast_ref(x, (2, 0), (3, 4, 2)))


def test_broadcast_in_dim_narrow_types():
  x = np.array([-8, 7], ml_dtypes.int4)
  out = _one("""
  func.func @main(%x: tensor<2xi4>) -> tensor<3x2xi4> {
    %0 = stablehlo.broadcast_in_dim %x, dims = [1]
        : (tensor<2xi4>) -> tensor<3x2xi4>
    return %0 : tensor<3x2xi4>
  }""", x)
  assert out.dtype == ml_dtypes.int4
  assert out.astype(int).tolist() == [[-8, 7]] * 3


def test_legacy_broadcast_prepends_sizes():
  x = np.array([1.5, -2.0], ml_dtypes.bfloat16)
  out = _one("""
  func.func @main(%x: tensor<2xbf16>) -> tensor<3x2xbf16> {
    %0 = "stablehlo.broadcast"(%x) {broadcast_sizes = array<i64: 3>}
        : (tensor<2xbf16>) -> tensor<3x2xbf16>
    return %0 : tensor<3x2xbf16>
  }""", x)
  assert out.dtype == ml_dtypes.bfloat16
  assert out.astype(float).tolist() == [[1.5, -2.0]] * 3


def test_dynamic_broadcast_in_dim_takes_runtime_shape():
  x = np.array([[1], [2], [3]], np.int64)
  out = _one("""
  func.func @main(%x: tensor<?x1xi64>, %s: tensor<3xi32>) -> tensor<?x?x?xi64> {
    %0 = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [0, 2]
        : (tensor<?x1xi64>, tensor<3xi32>) -> tensor<?x?x?xi64>
    return %0 : tensor<?x?x?xi64>
  }""", x, np.array([3, 2, 4], np.int32))
  np.testing.assert_array_equal(out, _broadcast_ref(x, (0, 2), (3, 2, 4)))


def test_dynamic_broadcast_in_dim_rejects_bad_sizes():
  src = """
  func.func @main(%x: tensor<?xi64>, %s: tensor<1xi64>) -> tensor<?xi64> {
    %0 = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [0]
        : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
    return %0 : tensor<?xi64>
  }"""
  with pytest.raises(support.InvalidArgumentError, match="cannot be broadcast"):
    _run(src, np.arange(3, dtype=np.int64), np.array([4], np.int64))


# --- reshape / transpose / reverse --------------------------------------------


def test_reshape_row_major_and_dynamic_reshape():
  x = np.arange(12, dtype=np.int16).reshape(3, 4)
  out = _one("""
  func.func @main(%x: tensor<3x4xi16>) -> tensor<2x6xi16> {
    %0 = stablehlo.reshape %x : (tensor<3x4xi16>) -> tensor<2x6xi16>
    return %0 : tensor<2x6xi16>
  }""", x)
  assert out.tolist() == [list(range(6)), list(range(6, 12))]
  out = _one("""
  func.func @main(%x: tensor<?x4xi16>, %s: tensor<3xi64>) -> tensor<?x?x?xi16> {
    %0 = stablehlo.dynamic_reshape %x, %s
        : (tensor<?x4xi16>, tensor<3xi64>) -> tensor<?x?x?xi16>
    return %0 : tensor<?x?x?xi16>
  }""", x, np.array([2, 3, 2], np.int64))
  assert out.shape == (2, 3, 2)
  assert out.reshape(-1).tolist() == list(range(12))


def test_dynamic_reshape_wrong_size_is_an_error():
  src = """
  func.func @main(%x: tensor<?xf32>, %s: tensor<1xi64>) -> tensor<?xf32> {
    %0 = stablehlo.dynamic_reshape %x, %s
        : (tensor<?xf32>, tensor<1xi64>) -> tensor<?xf32>
    return %0 : tensor<?xf32>
  }"""
  with pytest.raises(support.InvalidArgumentError, match="cannot reshape"):
    _run(src, np.zeros(4, np.float32), np.array([5], np.int64))


def test_transpose_follows_permutation():
  x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
  out = _one("""
  func.func @main(%x: tensor<2x3x4xf64>) -> tensor<4x2x3xf64> {
    %0 = stablehlo.transpose %x, dims = [2, 0, 1]
        : (tensor<2x3x4xf64>) -> tensor<4x2x3xf64>
    return %0 : tensor<4x2x3xf64>
  }""", x)
  assert out.shape == (4, 2, 3)
  for i, j, k in itertools.product(range(4), range(2), range(3)):
    # spec: result[i0, i1, i2] = operand[j] with j[permutation[k]] = i[k].
    assert out[i, j, k] == x[j, k, i]


def test_reverse_selected_dimensions_complex():
  x = (np.arange(6) + 1j * np.arange(6)).astype(np.complex64).reshape(2, 3)
  out = _one("""
  func.func @main(%x: tensor<2x3xcomplex<f32>>) -> tensor<2x3xcomplex<f32>> {
    %0 = stablehlo.reverse %x, dims = [1]
        : tensor<2x3xcomplex<f32>>
    return %0 : tensor<2x3xcomplex<f32>>
  }""", x)
  assert out.tolist() == [row[::-1] for row in x.tolist()]


# --- slicing ------------------------------------------------------------------


def test_slice_with_strides():
  x = np.arange(30, dtype=np.uint8).reshape(5, 6)
  out = _one("""
  func.func @main(%x: tensor<5x6xui8>) -> tensor<2x2xui8> {
    %0 = stablehlo.slice %x [1:5:2, 0:4:3]
        : (tensor<5x6xui8>) -> tensor<2x2xui8>
    return %0 : tensor<2x2xui8>
  }""", x)
  assert out.tolist() == [[x[1, 0], x[1, 3]], [x[3, 0], x[3, 3]]]


_DYN_SLICE = """
  func.func @main(%x: tensor<4x5xi32>, %i: tensor<i64>, %j: tensor<i64>)
      -> tensor<2x3xi32> {
    %0 = stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 3]
        : (tensor<4x5xi32>, tensor<i64>, tensor<i64>) -> tensor<2x3xi32>
    return %0 : tensor<2x3xi32>
  }"""


@pytest.mark.parametrize("i,j,ci,cj", [(1, 1, 1, 1), (-5, 2, 0, 2),
                                       (3, 9, 2, 2), (100, -100, 2, 0)])
def test_dynamic_slice_clamps_start_indices(i, j, ci, cj):
  x = np.arange(20, dtype=np.int32).reshape(4, 5)
  out = _one(_DYN_SLICE, x, np.array(i, np.int64), np.array(j, np.int64))
  assert out.tolist() == x[ci:ci + 2, cj:cj + 3].tolist()


def test_dynamic_slice_unsigned_index():
  x = np.arange(6, dtype=np.float32)
  out = _one("""
  func.func @main(%x: tensor<6xf32>, %i: tensor<ui8>) -> tensor<2xf32> {
    %0 = stablehlo.dynamic_slice %x, %i, sizes = [2]
        : (tensor<6xf32>, tensor<ui8>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }""", x, np.array(250, np.uint8))
  assert out.tolist() == [4.0, 5.0]


_DUS = """
  func.func @main(%x: tensor<4x4xi8>, %u: tensor<2x3xi8>, %i: tensor<i32>,
                  %j: tensor<i32>) -> tensor<4x4xi8> {
    %0 = stablehlo.dynamic_update_slice %x, %u, %i, %j
        : (tensor<4x4xi8>, tensor<2x3xi8>, tensor<i32>, tensor<i32>)
        -> tensor<4x4xi8>
    return %0 : tensor<4x4xi8>
  }"""


@pytest.mark.parametrize("i,j,ci,cj", [(0, 0, 0, 0), (3, 3, 2, 1),
                                       (-1, 1, 0, 1)])
def test_dynamic_update_slice_clamps_and_copies(i, j, ci, cj):
  x = np.zeros((4, 4), np.int8)
  u = np.arange(1, 7, dtype=np.int8).reshape(2, 3)
  out = _one(_DUS, x, u, np.array(i, np.int32), np.array(j, np.int32))
  want = np.zeros((4, 4), np.int8)
  for a, b in itertools.product(range(2), range(3)):
    want[ci + a, cj + b] = u[a, b]
  assert out.tolist() == want.tolist()
  assert not x.any()  # the operand is not modified in place


def test_real_dynamic_slice_and_bounds_error():
  src = """
  func.func @main(%x: tensor<?x?xi32>, %b: tensor<2xi64>, %e: tensor<2xi64>,
                  %s: tensor<2xi64>) -> tensor<?x?xi32> {
    %0 = stablehlo.real_dynamic_slice %x, %b, %e, %s
        : (tensor<?x?xi32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)
        -> tensor<?x?xi32>
    return %0 : tensor<?x?xi32>
  }"""
  x = np.arange(20, dtype=np.int32).reshape(4, 5)
  i64 = lambda *v: np.array(v, np.int64)
  out = _one(src, x, i64(1, 0), i64(4, 5), i64(2, 2))
  assert out.tolist() == x[1:4:2, 0:5:2].tolist()
  with pytest.raises(support.InvalidArgumentError, match="slice axis 0"):
    _run(src, x, i64(1, 0), i64(5, 5), i64(1, 1))


# --- concatenate / pad --------------------------------------------------------


def test_concatenate_along_dimension():
  a = np.arange(4, dtype=np.int64).reshape(2, 2)
  b = np.arange(10, 16, dtype=np.int64).reshape(2, 3)
  out = _one("""
  func.func @main(%a: tensor<2x2xi64>, %b: tensor<2x3xi64>) -> tensor<2x5xi64> {
    %0 = stablehlo.concatenate %a, %b, dim = 1
        : (tensor<2x2xi64>, tensor<2x3xi64>) -> tensor<2x5xi64>
    return %0 : tensor<2x5xi64>
  }""", a, b)
  assert out.tolist() == [[0, 1, 10, 11, 12], [2, 3, 13, 14, 15]]


def _pad_ref(x, value, lo, hi, interior):
  """spec: result[i] = operand[(i - lo) / (interior + 1)] where that is an
  exact in-range index, else the padding value."""
  shape = [lo[d] + x.shape[d] + max(x.shape[d] - 1, 0) * interior[d] + hi[d]
           for d in range(x.ndim)]
  out = np.full(shape, value, dtype=x.dtype)
  for idx in itertools.product(*(range(s) for s in shape)):
    src = []
    for d, i in enumerate(idx):
      q, r = divmod(i - lo[d], interior[d] + 1)
      if r or not 0 <= q < x.shape[d]:
        break
      src.append(q)
    else:
      out[idx] = x[tuple(src)]
  return out


@pytest.mark.parametrize("lo,hi,interior", [
    ((0, 1), (2, 1), (1, 2)),  # the spec example
    ((-1, 2), (1, -3), (2, 1)),
    ((-1, -1), (0, -4), (0, 1)),  # an empty result dimension
    ((-2, 0), (0, 0), (1, 0)),  # negative low cuts into interior padding
    ((1, 0), (0, 0), (0, 0)),
])
def test_pad_edges_interior_and_negative(lo, hi, interior):
  x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
  want = _pad_ref(x, -1, lo, hi, interior)
  shape = "x".join(str(s) for s in want.shape)
  out = _one(f"""
  func.func @main(%x: tensor<2x3xi32>, %v: tensor<i32>)
      -> tensor<{shape}xi32> {{
    %0 = stablehlo.pad %x, %v, low = {list(lo)}, high = {list(hi)},
        interior = {list(interior)}
        : (tensor<2x3xi32>, tensor<i32>) -> tensor<{shape}xi32>
    return %0 : tensor<{shape}xi32>
  }}""", x, np.array(-1, np.int32))
  np.testing.assert_array_equal(out, want)


def test_dynamic_pad_matches_pad_formula():
  x = np.arange(1, 9, dtype=np.float32).reshape(4, 2)
  lo, hi, interior = (1, -1), (-2, 2), (1, 2)
  out = _one("""
  func.func @main(%x: tensor<?x2xf32>, %v: tensor<f32>, %l: tensor<2xi32>,
                  %h: tensor<2xi32>, %n: tensor<2xi32>) -> tensor<?x?xf32> {
    %0 = stablehlo.dynamic_pad %x, %v, %l, %h, %n
        : (tensor<?x2xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>,
           tensor<2xi32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }""", x, np.array(0.5, np.float32), *(np.array(v, np.int32)
                                         for v in (lo, hi, interior)))
  np.testing.assert_array_equal(out, _pad_ref(x, 0.5, lo, hi, interior))


# --- iota ---------------------------------------------------------------------


@pytest.mark.parametrize("ty,dtype", [
    ("i32", np.int32), ("ui8", np.uint8), ("f16", np.float16),
    ("bf16", ml_dtypes.bfloat16), ("f8E4M3FN", ml_dtypes.float8_e4m3fn),
    ("complex<f64>", np.complex128), ("i4", ml_dtypes.int4),
])
def test_iota_types(ty, dtype):
  out = _one(f"""
  func.func @main() -> tensor<3x5x{ty}> {{
    %0 = stablehlo.iota dim = 1 : tensor<3x5x{ty}>
    return %0 : tensor<3x5x{ty}>
  }}""")
  assert out.dtype == np.dtype(dtype) and out.shape == (3, 5)
  assert np.asarray(out, np.complex128).tolist() == [[0, 1, 2, 3, 4]] * 3


def test_iota_wraps_narrow_integers():
  out = _one("""
  func.func @main() -> tensor<6xui2> {
    %0 = stablehlo.iota dim = 0 : tensor<6xui2>
    return %0 : tensor<6xui2>
  }""")
  assert out.astype(int).tolist() == [0, 1, 2, 3, 0, 1]


def test_iota_rounds_once_into_f8():
  out = _one("""
  func.func @main() -> tensor<20xf8E5M2> {
    %0 = stablehlo.iota dim = 0 : tensor<20xf8E5M2>
    return %0 : tensor<20xf8E5M2>
  }""")
  want = np.arange(20, dtype=np.float64).astype(ml_dtypes.float8_e5m2)
  assert out.astype(float).tolist() == want.astype(float).tolist()
  assert float(out[17]) == 16.0 and float(out[19]) == 20.0  # round-to-even


def test_iota_quantized_uses_quantize():
  # quantize(i) = clamp(round_half_even(i / 0.5 + 3), -128, 127) as i8.
  out = _one("""
  func.func @main() -> tensor<4x!quant.uniform<i8:f32, 5.000000e-01:3>> {
    %0 = stablehlo.iota dim = 0
        : tensor<4x!quant.uniform<i8:f32, 5.000000e-01:3>>
    return %0 : tensor<4x!quant.uniform<i8:f32, 5.000000e-01:3>>
  }""")
  assert out.dtype == np.int8 and out.tolist() == [3, 5, 7, 9]


def test_dynamic_iota_takes_runtime_shape():
  out = _one("""
  func.func @main(%s: tensor<2xi64>) -> tensor<?x?xi64> {
    %0 = stablehlo.dynamic_iota %s, dim = 0 : (tensor<2xi64>) -> tensor<?x?xi64>
    return %0 : tensor<?x?xi64>
  }""", np.array([3, 2], np.int64))
  assert out.tolist() == [[0, 0], [1, 1], [2, 2]]


# --- sizes --------------------------------------------------------------------


def test_get_and_set_dimension_size():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  src = """
  func.func @main(%x: tensor<?x4xf32>, %n: tensor<i32>) -> (tensor<i32>,
      tensor<?x4xf32>, tensor<i32>) {
    %0 = stablehlo.get_dimension_size %x, dim = 0
        : (tensor<?x4xf32>) -> tensor<i32>
    %1 = "stablehlo.set_dimension_size"(%x, %n) {dimension = 0 : i64}
        : (tensor<?x4xf32>, tensor<i32>) -> tensor<?x4xf32>
    %2 = stablehlo.get_dimension_size %1, dim = 0
        : (tensor<?x4xf32>) -> tensor<i32>
    return %0, %1, %2 : tensor<i32>, tensor<?x4xf32>, tensor<i32>
  }"""
  size, y, size2 = _run(src, x, np.array(2, np.int32))
  assert size.dtype == np.int32 and int(size) == 3
  assert y.tolist() == x[:2].tolist() and int(size2) == 2


# --- quantized storage just moves ---------------------------------------------


def test_quantized_storage_moves_unchanged():
  q = "!quant.uniform<i8:f32, 2.500000e-01:-1>"
  x = np.array([[-128, 0, 5], [7, 127, -3]], np.int8)
  out = _run(f"""
  func.func @main(%x: tensor<2x3x{q}>) -> (tensor<3x2x{q}>, tensor<2x1x{q}>,
      tensor<6x{q}>) {{
    %0 = stablehlo.transpose %x, dims = [1, 0]
        : (tensor<2x3x{q}>) -> tensor<3x2x{q}>
    %1 = stablehlo.slice %x [0:2, 2:3] : (tensor<2x3x{q}>) -> tensor<2x1x{q}>
    %2 = stablehlo.reshape %x : (tensor<2x3x{q}>) -> tensor<6x{q}>
    return %0, %1, %2 : tensor<3x2x{q}>, tensor<2x1x{q}>, tensor<6x{q}>
  }}""", x)
  assert all(o.dtype == np.int8 for o in out)
  assert out[0].tolist() == x.T.tolist()
  assert out[1].tolist() == x[:, 2:3].tolist()
  assert out[2].tolist() == x.reshape(-1).tolist()


def test_every_kernel_is_registered():
  for name in ("broadcast_in_dim", "broadcast", "dynamic_broadcast_in_dim",
               "reshape", "dynamic_reshape", "transpose", "reverse", "slice",
               "real_dynamic_slice", "dynamic_slice", "dynamic_update_slice",
               "concatenate", "pad", "dynamic_pad", "iota", "dynamic_iota",
               "get_dimension_size", "set_dimension_size", "tuple",
               "get_tuple_element", "optimization_barrier", "after_all",
               "create_token"):
    assert registry.get("stablehlo." + name).interpreter is not None, name


# --- corpus -------------------------------------------------------------------

_INTERPRET_FILES = (
    "broadcast_in_dim", "reshape", "transpose", "slice", "dynamic_slice",
    "dynamic_update_slice", "concatenate", "pad", "reverse", "iota",
    "get_dimension_size", "tuple_and_get_tuple_element",
    "optimization_barrier", "after_all", "dynamic_broadcast_in_dim",
    "dynamic_iota", "dynamic_pad", "dynamic_reshape")

# A fixed, small sample of generated programs that use these ops.
_TESTDATA_FILES = (
    "broadcast_in_dim_bfloat16_2.mlir",
    "reshape_float32_3_4_5.mlir",
    "transpose_float32_2_3_4.mlir",
    "pad_complex128_2_3_complex128.mlir",
    "pad_bool_2_3_bool.mlir",
    "rev_float32_3_4_5.mlir",
    "slice_float32_7_5_3.mlir",
    "concatenate_float32_2_3_4_float32_3_3_4_float32_4_3_4.mlir",
    "squeeze_bfloat16_1_2.mlir",
    "device_put_bool_3_4.mlir",
    "dynamic_slice_float32_3_uint8_1.mlir",
    "dynamic_update_slice_float32_7_5_3_float32_2_0_1_int64_3.mlir",
)


@pytest.mark.parametrize("name", _INTERPRET_FILES)
def test_interpret_corpus(name):
  corpus_testing.run_corpus_file("interpret", f"{name}.mlir")


@pytest.mark.parametrize("name", _TESTDATA_FILES)
def test_testdata_sample(name):
  corpus_testing.run_corpus_file("testdata", name)
