"""Tests of errors.py: exception -> code mapping and the PJRT_Error vtable."""

import ctypes

import pytest

import support
from pjrt._src import abi_types
from pjrt._src.plugin import errors


@pytest.mark.parametrize("exc,code", [
    (support.InvalidArgumentError("x"), support.StatusCode.INVALID_ARGUMENT),
    (support.UnimplementedError("x"), support.StatusCode.UNIMPLEMENTED),
    (support.DataLossError("x"), support.StatusCode.DATA_LOSS),
    (MemoryError(), support.StatusCode.RESOURCE_EXHAUSTED),
    (RecursionError(), support.StatusCode.INVALID_ARGUMENT),
    (KeyError("k"), support.StatusCode.INTERNAL),
])
def test_status_of(exc, code):
  got, message = errors.status_of(exc)
  assert got == code
  assert message


def test_internal_error_names_the_bug_and_where():
  try:
    {}["missing"]  # pylint: disable=pointless-statement
  except KeyError as e:
    code, message = errors.status_of(e)
  assert code == support.StatusCode.INTERNAL
  assert "KeyError" in message and "errors_test.py:" in message


def test_error_record_and_vtable():
  address = errors.new_error(support.StatusCode.NOT_FOUND, "no such thing")
  try:
    record = errors.get(address)
    assert (record.code, record.message) == (5, "no such thing")
    vtable_address = ctypes.c_void_p.from_address(address).value
    vtable = abi_types.PJRT_Error_FunctionTable.from_address(vtable_address)
    assert vtable.struct_size == abi_types.PJRT_Error_FunctionTable.STRUCT_SIZE
    get_code = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(vtable.get_code)
    assert get_code(address) == support.StatusCode.NOT_FOUND
    message = ctypes.c_void_p()
    size = ctypes.c_size_t()
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        vtable.message)(address, ctypes.addressof(message),
                        ctypes.addressof(size))
    assert ctypes.string_at(message.value, size.value) == b"no such thing"
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(vtable.destroy)(address)
    with pytest.raises(support.InvalidArgumentError):
      errors.get(address)
  finally:
    errors.destroy(address)  # Ignored when already destroyed.


def test_permanent_errors_survive_destroy():
  address = errors.new_permanent_error(support.StatusCode.UNAVAILABLE, "gone")
  errors.destroy(address)
  assert errors.get(address).message == "gone"
