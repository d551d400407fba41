"""Tests for the CPU elemental emitter: every non-transcendental elementwise
opcode JIT'ed as a scalar loop and as a 16-lane vector loop, compared bit
for bit with the HLO evaluator on special values (NaN, infinities, -0,
denormals, INT_MIN, shift amounts past the width...), plus loads / stores of
every storage type and `emit_scalar_computation`.

All kernels of the table live in one LLVM module compiled once.
"""

import ctypes
import itertools
import warnings

import ml_dtypes
import numpy as np
import pytest

import support
from xla import primitive_util
from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.parser import hlo_parser
from xla.service.cpu import elemental_ir_emitter as eie
from xla.service.cpu import elemental_testing as et
from xla.service.cpu import jit
from xla.xla_data import PrimitiveType as P

_F32 = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.7, -3.7, 7.0,
        1e-40, -1e-40, 3e38, -3e38, 1e30, 2**31, -2**31 - 1000, 2**64,
        np.inf, -np.inf, np.nan, 126.0, 255.6, -129.0, 65504.0, 70000.0,
        1.00390625, 1.01171875]
_INTS = {
    "s8": [0, 1, -1, 2, -2, 7, 8, 127, -128, 3, -3, 9],
    "s16": [0, 1, -1, 15, 16, 17, 32767, -32768, 300, -7],
    "s32": [0, 1, -1, 31, 32, 33, 2**31 - 1, -2**31, 123456, -7, 2],
    "s64": [0, 1, -1, 63, 64, 65, 2**63 - 1, -2**63, 2**53 + 1,
            -(2**53) - 3, 2**55 + 2**3 + 1, 5],
    "u8": [0, 1, 2, 7, 8, 9, 127, 128, 255, 200],
    "u16": [0, 1, 15, 16, 17, 65535, 32768, 300],
    "u32": [0, 1, 31, 32, 33, 2**32 - 1, 2**31, 123456, 2**24 + 1],
    "u64": [0, 1, 63, 64, 65, 2**64 - 1, 2**63, 2**63 + 2**39 + 1, 2**40],
    "s4": [0, 1, -1, 7, -8, 3, -3, 4, 5],
    "u4": [0, 1, 7, 8, 15, 3, 4, 5],
    "s2": [0, 1, -1, -2],
    "u2": [0, 1, 2, 3],
    "pred": [False, True],
}


def _values(ty: str, exact_products: bool = False) -> np.ndarray:
  dt = primitive_util.numpy_dtype(primitive_util.from_name(ty))
  if ty in _INTS:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")  # bool / wrapping casts are intended
      return np.array(_INTS[ty], object).astype(np.int64 if ty[0] != "u"
                                                else np.uint64).astype(dt)
  if ty in ("c64", "c128") and exact_products:
    # numpy's complex multiply uses FMA in its SIMD loops (and overflows
    # differently per dtype); with these parts every product is exact.
    re = np.array([0.0, -0.0, 1.0, -2.5, 4.0, 0.5, 3.0])
    return (re[:, None] + 1j * re[::-1][None, :]).ravel().astype(dt)
  if ty in ("c64", "c128"):
    re = np.array([0.0, -0.0, 1.0, -2.5, 3e38, np.inf, np.nan, 1e-40])
    im = np.array([0.0, 1.0, -0.0, 4.0, -3e38, 1.0, 0.5, -np.inf])
    with np.errstate(all="ignore"):
      return (re[:, None] + 1j * im[None, :]).ravel().astype(dt)
  with np.errstate(all="ignore"):
    return np.array(_F32, np.float64).astype(dt)


def _inputs(types, op_text=""):
  """Every combination of the special values of each operand type."""
  cols = [_values(t, op_text.startswith("multiply")) for t in types]
  if len(cols) == 3:  # keep ternary products small
    cols = [c[:6] for c in cols]
  combos = list(itertools.product(*[range(len(c)) for c in cols]))
  return [c[[k[i] for k in combos]] for i, c in enumerate(cols)]


_FLOATS = ["f16", "bf16", "f32", "f64"]
_SINTS = ["s2", "s4", "s8", "s16", "s32", "s64"]
_UINTS = ["u2", "u4", "u8", "u16", "u32", "u64"]
_ALL = ["pred"] + _SINTS + _UINTS + _FLOATS

CASES = []


def _case(op_text, types, result):
  CASES.append((f"{op_text}:{','.join(types)}->{result}", op_text,
                tuple(types), result))


for t in _SINTS + _UINTS + _FLOATS + ["c64", "c128", "pred"]:
  _case("add(p0, p1)", [t, t], t)
  _case("subtract(p0, p1)", [t, t], t)
  _case("multiply(p0, p1)", [t, t], t)
  _case("negate(p0)", [t], t)
  _case("maximum(p0, p1)", [t, t], t)
  _case("minimum(p0, p1)", [t, t], t)
  _case("select(p0, p1, p2)", ["pred", t, t], t)
  _case("compare(p0, p1), direction=EQ", [t, t], "pred")
  _case("compare(p0, p1), direction=NE", [t, t], "pred")
  if t not in ("c64", "c128"):
    _case("clamp(p0, p1, p2)", [t, t, t], t)
    for d in ("LT", "LE", "GT", "GE"):
      _case(f"compare(p0, p1), direction={d}", [t, t], "pred")
for t in _SINTS + _UINTS + _FLOATS + ["c64", "c128"]:
  _case("divide(p0, p1)", [t, t], t)
for t in _SINTS + _UINTS + _FLOATS:
  _case("remainder(p0, p1)", [t, t], t)
  _case("abs(p0)", [t], t)
  _case("sign(p0)", [t], t)
for t in _FLOATS:
  for d in ("LT", "EQ", "GE", "NE"):
    _case(f"compare(p0, p1), direction={d}, type=TOTALORDER", [t, t], "pred")
  for op in ("floor", "ceil", "round-nearest-afz", "round-nearest-even",
             "sqrt", "rsqrt"):
    _case(f"{op}(p0)", [t], t)
  _case("is-finite(p0)", [t], "pred")
for t in _SINTS + _UINTS + ["pred"]:
  for op in ("and", "or", "xor"):
    _case(f"{op}(p0, p1)", [t, t], t)
  _case("not(p0)", [t], t)
for t in _SINTS + _UINTS:
  for op in ("shift-left", "shift-right-arithmetic", "shift-right-logical"):
    _case(f"{op}(p0, p1)", [t, t], t)
  _case("popcnt(p0)", [t], t)
  _case("count-leading-zeros(p0)", [t], t)
  _case("mulhi(p0, p1)", [t, t], t)
  _case("power(p0, p1)", [t, t], t)
_case("power(p0, p1)", ["pred", "pred"], "pred")
for c, f in (("c64", "f32"), ("c128", "f64")):
  _case("abs(p0)", [c], f)
  _case("real(p0)", [c], f)
  _case("imag(p0)", [c], f)
  _case("complex(p0, p1)", [f, f], c)
  _case("sign(p0)", [c], c)
# Every conversion between the supported types.
for s, d in itertools.product(_ALL + ["c64", "c128"], repeat=2):
  if s in ("c64", "c128") and d not in ("c64", "c128") and d != "f32":
    continue
  _case("convert(p0)", [s], d)
for s, d in (("f32", "s32"), ("s32", "f32"), ("u32", "f32"), ("f64", "s64"),
             ("u64", "f64"), ("f16", "s16"), ("bf16", "u16"), ("s16", "bf16"),
             ("f16", "bf16"), ("bf16", "f16"), ("s8", "u8"), ("u4", "s4"),
             ("s4", "u4"), ("s2", "u2")):
  _case("bitcast-convert(p0)", [s], d)
for t in _FLOATS:
  for eb, mb in ((5, 10), (8, 7), (3, 2), (11, 52), (4, 0), (2, 1)):
    _case(f"reduce-precision(p0), exponent_bits={eb}, mantissa_bits={mb}",
          [t], t)

_IDS = [c[0] for c in CASES]
assert len(set(_IDS)) == len(_IDS), "duplicate case ids"


@pytest.fixture(scope="module")
def batch():
  # O0: the table is about semantics; compiling ~1700 kernels at O3 takes
  # tens of seconds. `test_o3_subset` runs the risky ones optimized.
  bt = et.KernelBatch(opt_level=0)
  kernels = {}
  for cid, op_text, types, result in CASES:
    complex_ = any(t in ("c64", "c128") for t in (*types, result))
    scalar = bt.add_elementwise(op_text, types, result, width=1)
    vector = None if complex_ else bt.add_elementwise(op_text, types, result,
                                                      width=16)
    kernels[cid] = (scalar, vector)
  bt.compile()
  bt.kernels = kernels
  return bt


def _evaluate(op_text, types, result, arrays):
  n = len(arrays[0])
  module, _ = et.parse_instruction(op_text, types, result, n)
  return hlo_evaluator.HloEvaluator().evaluate(module, arrays)[0]


def _same(got, want):
  """Bitwise equality, with any NaN equal to any NaN."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype and got.shape == want.shape
  if got.dtype.kind == "c":
    _same(got.real, want.real)
    _same(got.imag, want.imag)
    return
  if got.dtype.kind in "fV" or got.dtype in (np.dtype(ml_dtypes.bfloat16),):
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    bad = ~both_nan & ((g != w) | (np.signbit(g) != np.signbit(w)))
  else:
    bad = got != want
  if np.any(bad):
    idx = np.nonzero(bad)[0][:8]
    raise AssertionError(f"{int(bad.sum())} mismatches, e.g. at {idx}: got "
                         f"{got[idx]} want {want[idx]}")


# C64 / C128 moduli come from sqrt(re^2 + im^2) (C64) or a scaled formula
# (C128) instead of libm's hypot: allow a few ulps there.
_APPROX = {"abs(p0):c64->f32": 2e-7, "abs(p0):c128->f64": 1e-15,
           "sign(p0):c64->c64": 2e-7, "sign(p0):c128->c128": 1e-15}


@pytest.mark.parametrize("cid,op_text,types,result", CASES, ids=_IDS)
def test_matches_evaluator(batch, cid, op_text, types, result):
  arrays = _inputs(types, op_text)
  want = _evaluate(op_text, types, result, arrays)
  for kernel in batch.kernels[cid]:
    if kernel is None:
      continue
    got = batch.run(kernel, *arrays)
    if cid in _APPROX:
      np.testing.assert_allclose(got, want, rtol=_APPROX[cid],
                                 equal_nan=True)
      continue
    _same(got, want)


# Cases whose IR has traps an optimizer could exploit (poison shift amounts,
# division by zero, out-of-range float -> int, bit tricks): also checked at
# O3, as vector loops with a scalar remainder.
_O3 = [c for c in CASES if any(k in c[0] for k in (
    "shift-left(p0, p1):s32", "shift-right-arithmetic(p0, p1):u4",
    "shift-right-logical(p0, p1):s64", "divide(p0, p1):s8",
    "divide(p0, p1):u32", "remainder(p0, p1):s64", "remainder(p0, p1):f32",
    "convert(p0):f32->s32", "convert(p0):f64->u64", "convert(p0):f32->s4",
    "convert(p0):f64->bf16", "convert(p0):s64->bf16",
    "convert(p0):f32->bf16", "type=TOTALORDER:f32", "popcnt(p0):u16",
    "count-leading-zeros(p0):s4", "exponent_bits=5, mantissa_bits=10:f32",
    "power(p0, p1):s32", "maximum(p0, p1):f32", "minimum(p0, p1):f16",
    "add(p0, p1):bf16", "clamp(p0, p1, p2):f64", "sign(p0):f32",
    "round-nearest-afz(p0):f32", "rsqrt(p0):f32"))]


def test_o3_subset_matches_evaluator():
  bt = et.KernelBatch(opt_level=3)
  handles = [(bt.add_elementwise(op, types, res, width=16), op, types, res)
             for _, op, types, res in _O3]
  bt.compile()
  assert len(handles) >= 25
  for k, op, types, res in handles:
    arrays = _inputs(types, op)
    _same(bt.run(k, *arrays), _evaluate(op, types, res, arrays))


def test_table_covers_contract_opcodes():
  names = {c[1].split("(")[0] for c in CASES}
  contract = {"abs", "add", "and", "ceil", "clamp", "count-leading-zeros",
              "compare", "complex", "convert", "divide", "floor", "imag",
              "is-finite", "maximum", "minimum", "multiply", "negate", "not",
              "or", "popcnt", "power", "real", "reduce-precision",
              "remainder", "round-nearest-afz", "round-nearest-even",
              "rsqrt", "select", "shift-left", "shift-right-arithmetic",
              "shift-right-logical", "sign", "sqrt", "subtract", "xor",
              "bitcast-convert"}
  assert contract <= names, contract - names


# --- loads and stores -------------------------------------------------------


@pytest.mark.parametrize("ty", _ALL + ["c64", "c128"])
def test_copy_roundtrips_every_storage_type(ty):
  """load_element / store_element keep every bit pattern (bf16 NaNs too)."""
  bt = et.KernelBatch()
  complex_ = ty in ("c64", "c128")
  pt = primitive_util.from_name(ty)
  ks = [bt.add_loop(f"copy{w}", [pt], pt, lambda b, v: v[0], width=w)
        for w in ((1,) if complex_ else (1, 8, 16))]
  bt.compile()
  x = _values(ty)
  x = np.concatenate([x] * 5)
  for k in ks:
    _same(bt.run(k, x), x)


def test_compute_types():
  assert str(eie.compute_type(P.PRED)) == "i1"
  assert str(eie.compute_type(P.S4)) == "i8"
  assert str(eie.compute_type(P.U64)) == "i64"
  assert str(eie.compute_type(P.BF16)) == "float"
  assert str(eie.compute_type(P.F16)) == "half"
  assert str(eie.compute_type(P.F64)) == "double"
  assert str(eie.compute_type(P.C64)) == "{float, float}"
  with pytest.raises(support.UnimplementedError):
    eie.compute_type(P.F8E5M2)


def test_bf16_rounding_is_ties_to_even_and_keeps_nan():
  bt = et.KernelBatch()
  k = bt.add_elementwise("convert(p0)", ["f32"], "bf16", width=16)
  bt.compile()
  bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF,
                   0x7FC00001, 0xFF800001, 0x00008000, 0x80018000] * 3,
                  np.uint32)
  x = bits.view(np.float32)
  got = bt.run(k, x)
  with np.errstate(all="ignore"):
    want = x.astype(ml_dtypes.bfloat16)
  _same(got, want)
  assert np.all(np.isnan(got[4::8].astype(np.float32)))


def test_unsupported_combinations_raise_naming_the_op():
  bt = et.KernelBatch()
  with pytest.raises(support.UnimplementedError, match="and"):
    bt.add_elementwise("and(p0, p1)", ["f32", "f32"], "f32")
  with pytest.raises(support.UnimplementedError, match="(?i)f8e5m2"):
    bt.add_elementwise("convert(p0)", ["f32"], "f8e5m2")
  with pytest.raises(support.UnimplementedError, match="bitcast-convert"):
    bt.add_elementwise("bitcast-convert(p0)", ["f32"], "f64")


# --- scalar computations ----------------------------------------------------

_SCALAR_HLO = """HloModule m

helper {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

ENTRY comp {
  x = f32[] parameter(0)
  t = (s32[], bf16[]) parameter(1)
  i = s32[] get-tuple-element(t), index=0
  h = bf16[] get-tuple-element(t), index=1
  c = f32[] constant(1.5)
  k = s32[] constant(-3)
  xi = f32[] convert(i)
  s = f32[] add(x, c)
  m = f32[] call(s, xi), to_apply=helper
  lt = pred[] compare(x, c), direction=LT
  sel = s32[] select(lt, i, k)
  hh = bf16[] multiply(h, h)
  ROOT r = (f32[], (s32[], pred[]), bf16[]) tuple(m, (s32[], pred[]) tuple(sel, lt), hh)
}
"""


def test_emit_scalar_computation_matches_evaluator():
  module = hlo_parser.parse_and_return_unverified_module(_SCALAR_HLO)
  comp = module.entry_computation
  bt = et.KernelBatch()
  fn = eie.emit_scalar_computation(bt.module, comp, "scalar_fn")
  assert "alwaysinline" in str(fn.attributes)
  bt.compile()
  cfn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 7))(
      bt.address("scalar_fn"))
  ev = hlo_evaluator.HloEvaluator()
  for x, i, h in ((0.25, 7, 3.0), (2.0, -100, -1.25), (np.nan, 2**31 - 1,
                                                      1.0 / 3)):
    xs = np.array(x, np.float32)
    is_ = np.array(i, np.int32)
    hs = np.array(h, ml_dtypes.bfloat16)
    outs = [np.zeros((), np.float32), np.zeros((), np.int32),
            np.zeros((), np.bool_), np.zeros((), ml_dtypes.bfloat16)]
    cfn(xs.ctypes.data, is_.ctypes.data, hs.ctypes.data,
        *[o.ctypes.data for o in outs])
    want = ev.evaluate(module, [xs, (is_, hs)])
    for g, w in zip(outs, want):
      _same(g, w)


def test_scalar_computation_rejects_non_elementwise():
  text = """HloModule m
ENTRY e {
  p = f32[] parameter(0)
  ROOT r = f32[] custom-call(p), custom_call_target="foo"
}"""
  module = hlo_parser.parse_and_return_unverified_module(text)
  bt = et.KernelBatch()
  with pytest.raises(support.UnimplementedError):
    eie.emit_scalar_computation(bt.module, module.entry_computation, "f")


def test_vector_loop_vectorizes_to_host_width():
  bt = et.KernelBatch()
  bt.add_elementwise("add(p0, p1)", ["f32", "f32"], "f32", width=1)
  k512 = bt.add_elementwise("add(p0, p1)", ["f32", "f32"], "f32", width=1)
  # LLVM prefers 256-bit vectors on recent Intel server CPUs unless told.
  bt.compile({k512: '"prefer-vector-width"="512"'})
  ir_text = str(bt.llvm_module)
  bits = jit.host_target_info().vector_bits
  if bits >= 256:
    assert "<8 x float>" in ir_text
  if bits >= 512:
    assert "<16 x float>" in ir_text


# --- complex transcendental functions ---------------------------------------

_COMPLEX_UNARY = ("exponential", "exponential-minus-one", "log",
                  "log-plus-one", "sqrt", "rsqrt", "sine", "cosine", "tan",
                  "tanh")


@pytest.mark.parametrize("ty,tol", [("c64", 2e-6), ("c128", 1e-13)])
def test_complex_transcendentals_match_evaluator(ty, tol):
  bt = et.KernelBatch(opt_level=0)
  ks = {op: bt.add_elementwise(f"{op}(p0)", [ty], ty) for op in
        _COMPLEX_UNARY}
  k_pow = bt.add_elementwise("power(p0, p1)", [ty, ty], ty)
  bt.compile()
  parts = np.array([0.0, -0.0, 0.5, -1.25, 2.0, -3.0, 1e-3, 7.5, -30.0])
  z = (parts[:, None] + 1j * parts[None, :]).ravel()
  z = z.astype(primitive_util.numpy_dtype(primitive_util.from_name(ty)))
  def norm(g, w):
    g, w = g.astype(np.complex128), w.astype(np.complex128)
    return np.abs(g - w) / np.maximum(np.abs(w), 1e-300)

  for op, k in ks.items():
    got = bt.run(k, z)
    want = _evaluate(f"{op}(p0)", [ty], ty, [z])
    fin = np.isfinite(want)
    assert np.all(np.isfinite(got[fin])), op
    assert norm(got[fin], want[fin]).max() <= tol, (op, z[fin][np.argmax(
        norm(got[fin], want[fin]))])
  x = z[z != 0][:40]
  y = np.resize(z[::-1], x.size) * 0.25
  got = bt.run(k_pow, x, y)
  want = _evaluate("power(p0, p1)", [ty, ty], ty, [x, y])
  assert norm(got, want).max() <= 10 * tol
  zeros = np.zeros(3, z.dtype)
  got = bt.run(k_pow, zeros, np.array([2.0, 0.0, 1j], z.dtype))
  assert got[0] == 0 and got[1] == 1 and np.isnan(got[2].real)


def test_clamp_and_select_take_scalars_with_vectors():
  """clamp's bounds and select's predicate may be scalars next to vector
  operands (HLO allows scalar clamp bounds)."""
  from xla.literal import Literal  # pylint: disable=g-import-not-at-top
  _, clamp = et.parse_instruction("clamp(p0, p1, p2)", ["f32", "f32", "f32"],
                                  "f32")
  _, sel = et.parse_instruction("select(p0, p1, p2)", ["pred", "f32", "f32"],
                                "f32")
  lo = eie.constant_value(Literal.scalar(-1.0, P.F32))
  hi = eie.constant_value(Literal.scalar(2.0, P.F32))
  true = eie.constant_value(Literal.scalar(True, P.PRED))

  def body(b, vals):
    c = eie.emit_elementwise(b, clamp, [lo, vals[0], hi])
    return eie.emit_elementwise(b, sel, [true, c, vals[0]])

  bt = et.KernelBatch()
  k = bt.add_loop("clamp_sel", [P.F32], P.F32, body, width=16)
  bt.compile()
  x = np.linspace(-3, 3, 37).astype(np.float32)
  np.testing.assert_array_equal(bt.run(k, x), np.clip(x, -1, 2))
