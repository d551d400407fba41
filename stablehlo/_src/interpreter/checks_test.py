"""Tests for the comparison rules of the check ops."""

import ml_dtypes
import numpy as np

from stablehlo._src.interpreter import checks


def test_ulp_distance_counts_representable_steps():
  one = np.float32(1.0)
  nxt = np.nextafter(one, np.float32(2))
  x = np.array([one, 0.0, -0.0, np.nan, 1.0], np.float32)
  y = np.array([nxt, -0.0, np.float32(1e-45), np.nan, np.nan], np.float32)
  d = checks.ulp_distance(x, y)
  assert d.tolist() == [1.0, 0.0, 1.0, 0.0, float("inf")]


def test_ulp_distance_across_zero_and_for_bf16():
  tiny = np.float64(5e-324)
  assert checks.ulp_distance(np.array([-tiny]), np.array([tiny]))[0] == 2
  b = np.array([1.0], ml_dtypes.bfloat16)
  c = np.array([1.0078125], ml_dtypes.bfloat16)  # next bf16 after 1.0
  assert checks.ulp_distance(b, c)[0] == 1


def test_exact_equality_is_ieee():
  x = np.array([np.nan, 0.0, 1.0])
  y = np.array([np.nan, -0.0, 1.0])
  assert checks.eq_mask(x, y).tolist() == [True, False, False]


def test_almost_eq_tolerance_and_nans_and_complex():
  x = np.array([1.0, np.nan, np.inf, 1.0])
  y = np.array([1.00009, np.nan, np.inf, 1.1])
  assert checks.almost_eq_mask(x, y, 1e-4).tolist() == [False, False, False,
                                                        True]
  c = np.array([1 + 1j], np.complex64)
  d = np.array([1 + 1.5j], np.complex64)
  assert checks.almost_eq_mask(c, d, 0.1).tolist() == [True]
  assert checks.almost_eq_mask(c, d, 1.0).tolist() == [False]


def test_close_mask_bounds():
  x = np.array([1.0, 1.0], np.float32)
  y = np.array([np.nextafter(np.float32(1), np.float32(2)), 1.0], np.float32)
  assert checks.close_mask(x, y, 0).tolist() == [True, False]
  assert checks.close_mask(x, y, 1).tolist() == [False, False]
  assert checks.close_mask(x, y, 3, min_ulp=1).tolist() == [False, True]
