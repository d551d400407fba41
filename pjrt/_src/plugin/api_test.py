"""Tests of api.py: the PJRT_Api table, the dispatcher's checks, the capsule,
and the behaviour after interpreter shutdown begins."""

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

import support
from pjrt._src import abi
from pjrt._src.plugin import api
from pjrt._src.plugin import native
from pjrt._src.plugin import testing


def test_table():
  table = api.get_api()
  assert table is api.get_api()
  assert table.struct_size == abi.PJRT_Api.STRUCT_SIZE
  assert abi.api_version(table) == (abi.API_MAJOR, abi.API_MINOR)
  assert table.pjrt_api_version.struct_size == abi.PJRT_Api_Version.STRUCT_SIZE
  assert all(abi.has_slot(table, slot) for slot in abi.SLOTS)
  assert api.implemented_slots() == list(abi.SLOTS)


def test_capsule():
  capsule = api.capsule()
  get_name = ctypes.pythonapi.PyCapsule_GetName
  get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
  get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
  get_pointer.restype = ctypes.c_void_p
  get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
  assert get_name(capsule) == b"pjrt_c_api"
  assert get_pointer(capsule, b"pjrt_c_api") == api.api_address()


@pytest.mark.parametrize("size", [0, 8, abi.PJRT_Client_PlatformName_Args
                                  .STRUCT_SIZE - 1])
def test_too_small_struct_is_rejected(size):
  c = testing.client(num_devices=1)
  try:
    args = abi.make_args(abi.PJRT_Client_PlatformName_Args, client=c.handle)
    args.struct_size = size
    with pytest.raises(support.InvalidArgumentError, match="struct_size"):
      c.plugin.call("Client_PlatformName", args)
    assert not args.platform_name  # Nothing was written.
  finally:
    c.close()


def test_newer_larger_struct_is_accepted():
  c = testing.client(num_devices=1)
  try:
    args = abi.make_args(abi.PJRT_Client_PlatformName_Args, client=c.handle)
    args.struct_size += 64
    assert c.plugin.call("Client_PlatformName", args).platform_name_size
  finally:
    c.close()


def test_null_args_pointer():
  function = abi.slot_function(api.get_api(), "Client_PlatformName")
  error = function(None)
  plugin = testing.plugin()
  exc = plugin.take_error(error)
  assert isinstance(exc, support.InvalidArgumentError)
  assert "NULL" in str(exc)


def test_older_client_create_struct_is_accepted():
  # kv_try_get_* were appended later; a struct that ends before is fine.
  args = abi.make_args(abi.PJRT_Client_Create_Args)
  args.struct_size = (abi.PJRT_Client_Create_Args.client.offset +
                      ctypes.sizeof(ctypes.c_void_p))
  plugin = testing.plugin()
  plugin.call("Client_Create", args)
  plugin.call("Client_Destroy", client=args.client)


def test_after_exit_only_cleanup_succeeds():
  # Run in a child: the atexit state cannot be undone.
  script = textwrap.dedent("""
      import numpy as np
      import support
      from pjrt._src.plugin import api, testing
      c = testing.client(num_devices=1)
      b = c.buffer_from_numpy(np.ones(2, np.float32))
      api._at_exit()
      b.close()                       # Cleanup slots still succeed ...
      try:
        c.platform_name               # ... anything else is refused.
      except support.UnavailableError as e:
        print("refused:", e)
      c.close()
      print("done")
  """)
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  proc = subprocess.run([sys.executable, "-c", script], env=env,
                        capture_output=True, text=True, timeout=120,
                        check=False)
  assert proc.returncode == 0, proc.stderr
  assert "refused: the openxla_cpu plugin is shut down" in proc.stdout
  assert proc.stdout.rstrip().endswith("done")


# A child that calls slots on foreign threads: pthread_create runs a slot
# (`PJRT_Error* f(Args*)` has the shape of a thread's start routine) on a
# new thread that has never run Python, like a thread of jaxlib's pool.
_FOREIGN_THREADS = textwrap.dedent("""
    import ctypes, threading, time
    from pjrt._src import abi
    from pjrt._src.plugin import api, errors, native

    api._load_slots()
    _, required = api._IMPLEMENTATIONS["Client_PlatformName"]
    started = threading.Event()

    def endless(args):  # Stands for a long compilation.
      del args
      started.set()
      while True:
        time.sleep(0.01)

    api._IMPLEMENTATIONS["Client_PlatformName"] = (endless, required)
    table = api.get_api()
    slot = ctypes.cast(table.PJRT_Client_PlatformName, ctypes.c_void_p).value
    libc = ctypes.CDLL(None)
    libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong),
                                    ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p]
    join_types = [ctypes.c_ulong, ctypes.POINTER(ctypes.c_void_p)]
    libc.pthread_join.argtypes = join_types
    # pthread_join called through PyDLL keeps holding the GIL meanwhile.
    join_holding_gil = ctypes.PyDLL(None).pthread_join
    join_holding_gil.argtypes = join_types

    def start(args):
      thread = ctypes.c_ulong()
      assert libc.pthread_create(ctypes.byref(thread), None, slot,
                                 ctypes.addressof(args)) == 0
      return thread

    args = abi.make_args(abi.PJRT_Client_PlatformName_Args)
    thread = start(args)
    assert started.wait(60)
    print("in flight:", native.foreign_calls())
    api._at_exit()  # Interrupts the slot and waits for it.
    print("in flight after exit:", native.foreign_calls())
    result = ctypes.c_void_p()
    libc.pthread_join(thread, ctypes.byref(result))
    print("interrupted:", bool(result.value) and
          result.value != api._SHUTDOWN[1] and
          "PluginShutDown" in errors.get(result.value).message)

    # After shutdown a foreign call needs no GIL: this thread keeps it.
    thread = start(args)
    result = ctypes.c_void_p()
    join_holding_gil(thread, ctypes.byref(result))
    print("refused without the GIL:", result.value == api._SHUTDOWN[1])
""")


def test_exit_ends_slot_calls_of_foreign_threads():
  if not native.enabled():
    pytest.skip("native trampolines are disabled")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  try:
    proc = subprocess.run([sys.executable, "-c", _FOREIGN_THREADS], env=env,
                          capture_output=True, text=True, timeout=120,
                          check=False)
  except subprocess.TimeoutExpired as e:
    pytest.fail(f"the child hung: {e.stdout!r}")
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.splitlines() == [
      "in flight: 1", "in flight after exit: 0", "interrupted: True",
      "refused without the GIL: True"]
