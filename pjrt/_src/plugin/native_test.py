"""Tests of native.py: trampolines keep a caller's pending exception.

A native caller (built here with llvmlite, as jaxlib's C++ would be) sets a
Python exception, calls a plugin slot, and reports whether the exception is
still the one it set: jaxlib destroys buffers while Python unwinds.
"""

import ctypes

import numpy as np
import pytest

from pjrt._src import abi
from pjrt._src.plugin import handles
from pjrt._src.plugin import native
from pjrt._src.plugin import runtime
from pjrt._src.plugin import testing

llvm = pytest.importorskip("llvmlite.binding")

_CALLER = None


def _api(name: str) -> int:
  return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value


def _caller():
  """int f(fn, arg, exc_type, message): calls fn(arg) with exc pending."""
  global _CALLER
  if _CALLER is None:
    text = f"""
define i32 @call_with_pending(i64 %fn, i64 %arg, i64 %type, i64 %msg) {{
entry:
  %ensure = inttoptr i64 {_api('PyGILState_Ensure')} to ptr
  %gil = call i32 %ensure()
  %set = inttoptr i64 {_api('PyErr_SetString')} to ptr
  %t = inttoptr i64 %type to ptr
  %m = inttoptr i64 %msg to ptr
  call void %set(ptr %t, ptr %m)
  %f = inttoptr i64 %fn to ptr
  %r = call i64 %f(i64 %arg)
  %match = inttoptr i64 {_api('PyErr_ExceptionMatches')} to ptr
  %same = call i32 %match(ptr %t)
  %clear = inttoptr i64 {_api('PyErr_Clear')} to ptr
  call void %clear()
  %release = inttoptr i64 {_api('PyGILState_Release')} to ptr
  call void %release(i32 %gil)
  %null = icmp eq i64 %r, 0
  %ok = zext i1 %null to i32
  %shifted = shl i32 %same, 1
  %out = or i32 %shifted, %ok
  ret i32 %out
}}
"""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(text)
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    function = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p)(
                                    engine.get_function_address(
                                        "call_with_pending"))
    _CALLER = (engine, function, ctypes.create_string_buffer(b"in flight"))
  return _CALLER


def test_slot_runs_and_pending_exception_survives():
  if not native.enabled():
    pytest.skip("native trampolines are disabled")
  c = testing.client()
  try:
    buffer = c.buffer_from_numpy(np.ones(3, np.float32))
    handle = buffer._handle  # pylint: disable=protected-access
    buffer._handle = None  # pylint: disable=protected-access
    args = abi.make_args(abi.PJRT_Buffer_Destroy_Args, buffer=handle)
    _, call, message = _caller()
    exc_type = ctypes.c_void_p.in_dll(ctypes.pythonapi,
                                      "PyExc_RuntimeError").value
    result = call(c.plugin.api.PJRT_Buffer_Destroy, ctypes.addressof(args),
                  exc_type, ctypes.addressof(message))
    assert result == 3  # The slot returned NULL; the exception is intact.
    with pytest.raises(Exception, match="not a live"):
      handles.TABLE.get(handle, runtime.BUFFER)  # It was destroyed.
  finally:
    c.close()


def test_signatures_compile():
  refusal = native.Refusal(result="error", stores=(
      (0, 24, 32, ("code", 0, 16)), (0, 32, 64, "message"),
      (2, 0, 64, "message_size")))
  entries = [("a", 0x1000, "p>p"), ("b", 0x1000, "ppp>v"),
             ("c", 0x1000, "p>i"), ("d", 0x1000, "pip>p", refusal),
             ("e", 0x1000, "p>i", native.Refusal(result=("code", 0, None)))]
  if not native.enabled():
    pytest.skip("native trampolines are disabled")
  addresses = native._compile(entries)  # pylint: disable=protected-access
  assert len(set(addresses.values())) == 5 and all(addresses.values())


def test_refusal_stores_only_through_pointers():
  refusal = native.Refusal(stores=((1, 0, 64, 7),))
  with pytest.raises(ValueError, match="non-pointer"):
    native._function_ir(0, 0x1000, "pi>v", refusal)  # pylint: disable=protected-access


def test_unknown_entry():
  with pytest.raises(KeyError):
    native.address("no such entry")
