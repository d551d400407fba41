"""Float spelling follows MLIR's printFloatValue / APFloat::toString.

The expected strings were printed by jaxlib (StableHLO 1.17) for the same bit
patterns; `test_random_values_match_jaxlib` re-checks many more against
jaxlib when it is installed.
"""

import re

import numpy as np
import pytest

from stablehlo._src import text
from stablehlo._src.ir import types as t
from stablehlo._src.testing import jaxlib_oracle
from stablehlo._src.text import dense

# (type, [(bit pattern, upstream spelling)]).
UPSTREAM = [
    ("f32", [
        (0x3F800000, "1.000000e+00"), (0x3DCCCCCD, "1.000000e-01"),
        # APFloat cuts the exact expansion before rounding: truncated here.
        (0xC0C807B6, "-6.25094127"),
        (0x3EAAAAAB, "0.333333343"),
        # No '.' in the natural form (16777216, 123456792): hex.
        (0x4B800000, "0x4B800000"), (0x4CEB79A3, "0x4CEB79A3"),
        (0x1, "1.401300e-45"), (0x7F7FFFFF, "3.40282347E+38"),
        (0x80000000, "-0.000000e+00"), (0x7F800000, "0x7F800000"),
        (0xFF800000, "0xFF800000"), (0x7FC00000, "0x7FC00000"),
        (0x3A83126F, "1.000000e-03"), (0x501502F9, "1.000000e+10"),
        (0x37D1B717, "2.500000e-05"), (0x449A522B, "1234.56775"),
        (0x3901742D, "1.23456775E-4"), (0x34000000, "1.1920929E-7"),
        (0x35800000, "9.53674316E-7"), (0x4B7FFFFF, "0x4B7FFFFF"),
    ]),
    ("f64", [
        (0x3FB999999999999A, "1.000000e-01"),
        (0x3FD5555555555555, "0.33333333333333331"),
        (0x419D6F3454000000, "0x419D6F3454000000"),
        (0x54B249AD2594C37D, "1.000000e+100"), (0x1, "4.940660e-324"),
        (0x4340000000000000, "0x4340000000000000"),
        (0x3FDE4260C4F2684C, "0.47280139191719139"),
        (0xC006BD30D1C25B42, "-2.8423782718122377"),
        (0x3EE4F8B588E368F1, "1.000000e-05"),
        (0x4059000000000000, "1.000000e+02"),
        (0x4480F0CF064DD592, "1.000000e+22"),
        (0x7FEFFFFFFFFFFFFF, "1.7976931348623157E+308"),
    ]),
    ("f16", [
        (0xBAB1, "-8.364250e-01"), (0x7BFF, "6.550400e+04"),
        (0x1, "5.960460e-08"), (0x2E66, "9.997550e-02"),
        (0x4259, "3.173830e+00"), (0x63D0, "1.000000e+03"),
        (0x68E, "1.000170e-04"),
    ]),
    ("bf16", [
        (0x3DCD, "1.000980e-01"), (0x3E9C, "3.046880e-01"),
        (0x714A, "1.000260e+30"), (0xFF7F, "-3.389530e+38"),
        (0x40E0, "7.000000e+00"), (0x3C24, "1.000980e-02"),
    ]),
    ("f8E4M3FN", [(0x7E, "4.480000e+02"), (0x1, "1.953130e-03"),
                  (0x2A, "3.125000e-01"), (0x7F, "0x7F"),
                  (0x80, "-0.000000e+00")]),
    ("f8E5M2", [(0x7B, "5.734400e+04"), (0x1, "1.525880e-05"),
                (0x7C, "0x7C"), (0x2E, "9.375000e-02")]),
    ("f8E4M3FNUZ", [(0x7F, "2.400000e+02"), (0x1, "9.765620e-04")]),
    ("f8E4M3B11FNUZ", [(0x7F, "3.000000e+01"), (0x1, "1.220700e-04")]),
    ("f8E5M2FNUZ", [(0x7F, "5.734400e+04"), (0x1, "7.629390e-06")]),
    ("f8E4M3", [(0x77, "2.400000e+02"), (0x78, "0x78"),
                (0x1, "1.953130e-03")]),
    ("f8E3M4", [(0x6F, "1.550000e+01"), (0x1, "1.562500e-02")]),
    ("f8E8M0FNU", [(0x0, "5.877470e-39"), (0x7F, "1.000000e+00"),
                   (0xFE, "1.701410e+38")]),
    ("f6E2M3FN", [(0x1F, "7.500000e+00"), (0x1, "1.250000e-01")]),
    ("f6E3M2FN", [(0x1F, "2.800000e+01"), (0x1, "6.250000e-02")]),
    ("f4E2M1FN", [(0x7, "6.000000e+00"), (0x1, "5.000000e-01"),
                  (0xB, "-1.500000e+00")]),
]

_CASES = [(ty, bits, want) for ty, rows in UPSTREAM for bits, want in rows]


@pytest.mark.parametrize("ty,bits,want", _CASES)
def test_format_float_like_upstream(ty, bits, want):
  ft = t.FloatType(ty)
  assert dense.format_float(dense.float_from_bits(bits, ft), ft) == want


def test_unrounded_python_float_prints_the_typed_value():
  # A literal kept as written (0.001) prints as the f32 value it denotes.
  assert dense.format_float(0.001, t.f32) == "1.000000e-03"
  assert dense.format_float(1 / 3, t.f32) == "0.333333343"
  assert dense.format_float(1 / 3, t.f64) == "0.33333333333333331"


def test_apfloat_to_string_forms():
  # Natural precision (f64: 17 digits), padding 3, TruncateZero.
  assert dense.apfloat_to_string(1.0, 53) == "1"
  assert dense.apfloat_to_string(1234.0, 53) == "1234"
  assert dense.apfloat_to_string(0.001, 53) == "0.001"  # 3 zeros: padding
  assert dense.apfloat_to_string(0.0001, 53) == "1.0E-4"
  assert dense.apfloat_to_string(0.0123, 53) == "0.0123"
  assert dense.apfloat_to_string(1e20, 53) == "1.0E+20"
  # The exponent form printFloatValue tries first.
  assert dense.apfloat_to_string(1.5, 53, 6, 0, False) == "1.500000e+00"
  assert dense.apfloat_to_string(-0.0, 53, 6, 0, False) == "-0.000000e+00"
  assert dense.apfloat_to_string(123456.0, 53, 6, 0, False) == "1.234560e+05"
  # The expansion 9.5367431640625 is cut to 6 digits before any rounding.
  assert dense.apfloat_to_string(2.0**-20, 24, 6, 0, False) == "9.536740e-07"
  # 16777215 is cut to 7 digits, then rounded half-up to 6.
  assert dense.apfloat_to_string(16777215.0, 24, 6, 0, False) == "1.677720e+07"


def _bits_of_every_value(ty):
  ft = t.FloatType(ty)
  width = dense.float_bits(ty)
  return ft, range(1 << width)


@pytest.mark.parametrize("ty", ["f16", "bf16", "f8E4M3FN", "f8E5M2",
                                "f8E4M3FNUZ", "f8E4M3B11FNUZ", "f8E5M2FNUZ",
                                "f8E4M3", "f8E3M4", "f8E8M0FNU", "f6E2M3FN",
                                "f6E3M2FN", "f4E2M1FN"])
def test_every_value_reads_back(ty):
  """Each spelling parses (with our parser) back to the same bits."""
  ft, all_bits = _bits_of_every_value(ty)
  step = 7 if ty in ("f16", "bf16") else 1
  bits = list(all_bits)[::step]
  values = [dense.float_from_bits(b, ft) for b in bits]
  elems = ", ".join(dense.format_float(v, ft) for v in values)
  src = (f"%0 = stablehlo.constant dense<[{elems}]> : "
         f"tensor<{len(values)}x{ty}>")
  module = text.parse_module(src)
  arr = module.body.operations[0].attr("value").array
  dtype = dense.numpy_dtype(ft)
  uint = {1: np.uint8, 2: np.uint16}[dtype.itemsize]
  got = arr.view(uint).tolist()
  for b, g, v in zip(bits, got, values):
    if np.isnan(float(v)):
      continue  # any NaN spelling is a NaN; the hex form keeps its bits
    assert b == g, (ty, hex(b), dense.format_float(v, ft))


@pytest.mark.skipif(jaxlib_oracle.skip_reason() is not None,
                    reason=str(jaxlib_oracle.skip_reason()))
@pytest.mark.parametrize("ty", ["f16", "bf16", "f32", "f64", "f8E4M3FN",
                                "f8E5M2", "f8E4M3FNUZ", "f8E4M3B11FNUZ",
                                "f8E5M2FNUZ", "f8E4M3", "f8E3M4", "f8E8M0FNU",
                                "f6E2M3FN", "f6E3M2FN", "f4E2M1FN"])
def test_random_values_match_jaxlib(ty):
  ft = t.FloatType(ty)
  width = dense.float_bits(ty)
  rng = np.random.default_rng(width)
  if width <= 8:
    bits = list(range(1 << width))
  else:
    # Random bit patterns, plus "ordinary" numbers of a few digits.
    bits = [int(b) for b in rng.integers(0, 1 << width, 400, dtype=np.uint64)]
    ordinary = np.concatenate([rng.uniform(-10, 10, 200),
                               np.round(rng.uniform(-1e3, 1e3, 200), 3)])
    bits += [dense.float_to_bits(v, ft) for v in ordinary]
  lines = [f"  %v{i} = stablehlo.constant dense<0x{b:X}> : tensor<{ty}>"
           for i, b in enumerate(bits)]
  src = "func.func @main() {\n" + "\n".join(lines) + "\n  return\n}\n"
  printed = jaxlib_oracle.canonical_text(src)
  assert printed is not None
  theirs = re.findall(r"dense<([^>]*)>", printed)
  assert len(theirs) == len(bits)
  for b, want in zip(bits, theirs):
    assert dense.format_float(dense.float_from_bits(b, ft), ft) == want, hex(b)
