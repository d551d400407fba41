"""The Layouts extension: the layouts of an executable's parameters and
outputs, of buffers and of a client's default layout, as jaxlib reads
them (serialized as XLA's layout text)."""

import ctypes

import numpy as np
import pytest

import support
from pjrt._src import abi
from pjrt._src.plugin import api
from pjrt._src.plugin import native
from pjrt._src.plugin import slots_layouts
from pjrt._src.plugin import testing

_PROGRAM = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<4xf32>, %c: tensor<f32>)
    -> (tensor<3x2xf32>, tensor<f32>, tensor<2x1x4xf32>) {
  %t = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %r = stablehlo.reshape %b : (tensor<4xf32>) -> tensor<1x4xf32>
  %s = stablehlo.broadcast_in_dim %r, dims = [1, 2] : (tensor<1x4xf32>) -> tensor<2x1x4xf32>
  return %t, %c, %s : tensor<3x2xf32>, tensor<f32>, tensor<2x1x4xf32>
}"""


@pytest.fixture(name="client")
def _client():
  c = testing.client(backend="interpreter", num_devices=1)
  yield c
  c.close()


def _extension():
  address = abi.find_extension(api.get_api(), abi.ExtensionType.LAYOUTS)
  assert address is not None
  ext = abi.PJRT_Layouts_Extension.from_address(address)
  assert ext.base.struct_size == abi.PJRT_Layouts_Extension.STRUCT_SIZE
  return ext


def _call(name: str, **fields):
  args_type = abi.LAYOUTS_FUNCTIONS[name]
  fn = abi.extension_function_type(args_type)(getattr(_extension(), name))
  args = abi.make_args(args_type, **fields)
  error = fn(ctypes.byref(args))
  if error:
    raise _error(error)
  return args


def _error(error) -> Exception:
  return support.InternalError(f"the extension returned PJRT_Error {error:#x}")


def _text(layout: int) -> str:
  args = _call("PJRT_Layouts_MemoryLayout_Serialize", layout=layout)
  try:
    return ctypes.string_at(args.serialized_bytes,
                            args.serialized_bytes_size).decode()
  finally:
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(args.serialized_layout_deleter)(
        args.serialized_layout)


def test_every_function_of_the_extension_is_there():
  ext = _extension()
  for name in abi.LAYOUTS_FUNCTIONS:
    assert getattr(ext, name), name
  # It follows the Shardings extension in the chain.
  assert abi.find_extension(api.get_api(), abi.ExtensionType.SHARDINGS)


def test_an_executables_layouts_are_row_major(client):
  exe = client.compile(_PROGRAM)
  handle = testing.call(client, "LoadedExecutable_GetExecutable",
                        loaded_executable=exe.handle).executable
  try:
    got = {}
    for which, count_field in (("Parameter", "num_parameters"),
                               ("Output", "num_outputs")):
      args = _call(f"PJRT_Layouts_PJRT_Executable_Get{which}Layouts",
                   executable=handle)
      count = getattr(args, count_field)
      layouts = (ctypes.c_void_p * count).from_address(args.layouts)
      got[which] = [_text(layout) for layout in layouts]
      # The executable keeps its layouts: destroying one changes nothing.
      _call("PJRT_Layouts_MemoryLayout_Destroy", layout=layouts[0])
      assert _text(layouts[0]) == got[which][0]
    assert got == {"Parameter": ["{1,0}", "{0}", "{}"],
                   "Output": ["{1,0}", "{}", "{2,1,0}"]}
  finally:
    testing.call(client, "Executable_Destroy", executable=handle)


def test_buffer_and_default_layouts(client):
  buffer = client.buffer_from_numpy(np.ones((2, 5, 3), np.float32))
  layout = _call("PJRT_Layouts_PJRT_Buffer_MemoryLayout",
                 buffer=buffer.handle).layout
  assert _text(layout) == "{2,1,0}"
  # A row-major layout of a small rank is shared: destroying it leaves it.
  _call("PJRT_Layouts_MemoryLayout_Destroy", layout=layout)
  assert _text(layout) == "{2,1,0}"
  assert _call("PJRT_Layouts_PJRT_Buffer_MemoryLayout",
               buffer=buffer.handle).layout == layout
  scalar = client.buffer_from_numpy(np.float32(3))
  assert _text(_call("PJRT_Layouts_PJRT_Buffer_MemoryLayout",
                     buffer=scalar.handle).layout) == "{}"
  dims = (ctypes.c_int64 * 2)(7, 9)
  default = _call("PJRT_Layouts_PJRT_Client_GetDefaultLayout",
                  client=client.handle, type=int(abi.BufferType.F32),
                  dims=dims, num_dims=2).layout
  assert _text(default) == "{1,0}"
  _call("PJRT_Layouts_MemoryLayout_Destroy", layout=default)
  # One of a large rank is the caller's, and destroyed.
  rank = slots_layouts.STATIC_RANKS + 1
  many = (ctypes.c_int64 * rank)(*([1] * rank))
  big = _call("PJRT_Layouts_PJRT_Client_GetDefaultLayout",
              client=client.handle, type=int(abi.BufferType.F32),
              dims=many, num_dims=rank).layout
  assert _text(big) == "{" + ",".join(map(str, range(rank - 1, -1, -1))) + "}"
  _call("PJRT_Layouts_MemoryLayout_Destroy", layout=big)
  with pytest.raises(support.XlaError):
    _text(big)  # a destroyed layout is an error, not a crash
  # Destroying NULL is allowed.
  _call("PJRT_Layouts_MemoryLayout_Destroy", layout=None)


def test_the_per_buffer_calls_have_native_fast_paths():
  # JAX asks for the layout of every buffer it makes from host data; these
  # three calls must not go through Python each time.
  if not api.fast_paths_enabled():
    pytest.skip("native fast paths are off")
  ext = _extension()
  for name in ("PJRT_Layouts_PJRT_Buffer_MemoryLayout",
               "PJRT_Layouts_MemoryLayout_Serialize",
               "PJRT_Layouts_MemoryLayout_Destroy"):
    assert getattr(ext, name) != native.address("extension:" + name), name
