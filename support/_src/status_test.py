"""Tests for support._src.status."""

import pytest

import support
from support._src import status as st


def test_codes_follow_absl_numbering():
  # absl/status/status.h values, which PJRT_Error_Code reuses.
  expected = {
      "OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3,
      "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5, "ALREADY_EXISTS": 6,
      "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
      "FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11,
      "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
      "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
  }
  assert {c.name: int(c) for c in support.StatusCode} == expected


@pytest.mark.parametrize("cls,builtin", [
    (support.InvalidArgumentError, ValueError),
    (support.NotFoundError, LookupError),
    (support.OutOfRangeError, IndexError),
    (support.UnimplementedError, NotImplementedError),
    (support.DeadlineExceededError, TimeoutError),
    (support.ResourceExhaustedError, MemoryError),
    (support.InternalError, RuntimeError),
    (support.PermissionDeniedError, PermissionError),
])
def test_errors_inherit_root_and_builtin(cls, builtin):
  with pytest.raises(builtin) as info:
    raise cls("boom")
  assert isinstance(info.value, support.XlaError)
  assert str(info.value) == "boom"


def test_every_error_code_has_exactly_one_class():
  codes = [c for c in support.StatusCode if c != support.StatusCode.OK]
  for code in codes:
    err = support.error_for_code(code, "m")
    assert err.code == code
    assert isinstance(err, support.XlaError)
  assert len({type(support.error_for_code(c, "")) for c in codes}) == len(codes)


def test_error_for_code_rejects_ok():
  with pytest.raises(ValueError):
    support.error_for_code(support.StatusCode.OK, "x")


def test_status_round_trip_and_raise():
  s = support.Status(support.StatusCode.NOT_FOUND, "no such device 7")
  assert not s.ok()
  assert str(s) == "NOT_FOUND: no such device 7"
  with pytest.raises(support.NotFoundError, match="no such device 7"):
    s.raise_if_error()
  assert support.Status().ok()
  assert str(support.Status.ok_status()) == "OK"
  support.Status().raise_if_error()  # OK does not raise


def test_status_accepts_int_codes():
  assert support.Status(12, "x").code is support.StatusCode.UNIMPLEMENTED


def test_from_exception_maps_foreign_exceptions_to_internal():
  s = support.Status.from_exception(KeyError("k"))
  assert s.code == support.StatusCode.INTERNAL
  assert "KeyError" in s.message
  s2 = support.Status.from_exception(support.UnimplementedError("op foo"))
  assert s2 == support.Status(support.StatusCode.UNIMPLEMENTED, "op foo")


def test_unimplemented_names_feature():
  err = st.unimplemented("stablehlo.fft of type complex<f64>")
  assert isinstance(err, NotImplementedError)
  assert "stablehlo.fft of type complex<f64>" in str(err)
  assert err.code == support.StatusCode.UNIMPLEMENTED
