"""Tokens in a program's signature: a `!stablehlo.token` parameter or
result is a TOKEN buffer of shape [] and zero bytes, on every backend and
on several devices; a token parameter also takes any zero-byte buffer (JAX
passes a token as a bool[0] array, and XLA's CPU client checks sizes
only)."""

import numpy as np
import pytest

import pjrt
import support
from pjrt._src import abi
from pjrt._src.plugin import backends
from pjrt._src.plugin import testing

_MAKE = """
func.func @main(%a: tensor<3xf32>) -> (tensor<3xf32>, !stablehlo.token) {
  %t = stablehlo.create_token : !stablehlo.token
  return %a, %t : tensor<3xf32>, !stablehlo.token
}"""

_THREAD = """
func.func @main(%a: tensor<3xf32>, %t: !stablehlo.token)
    -> (!stablehlo.token, tensor<3xf32>, !stablehlo.token) {
  %n = stablehlo.negate %a : tensor<3xf32>
  %u = stablehlo.after_all %t : !stablehlo.token
  return %t, %n, %u : !stablehlo.token, tensor<3xf32>, !stablehlo.token
}"""

_BACKENDS = ["interpreter", "evaluator"] + (
    ["cpu"] if backends.cpu_compiler_module() is not None else [])


@pytest.fixture(name="client", params=_BACKENDS)
def _client(request):
  c = testing.client(backend=request.param, num_devices=2)
  yield c
  c.close()


def _is_token(buffer) -> bool:
  return (buffer.element_type == abi.BufferType.TOKEN and
          buffer.shape == () and buffer.on_device_size_in_bytes == 0)


def test_a_token_result_is_an_empty_token_buffer(client):
  exe = client.compile(_MAKE)
  assert exe.output_element_types() == [abi.BufferType.F32,
                                        abi.BufferType.TOKEN]
  x = np.arange(3, dtype=np.float32)
  out, token = exe.execute([client.buffer_from_numpy(x)])
  np.testing.assert_array_equal(out.to_numpy(), x)
  assert _is_token(token)
  # A token has no data for the host.
  args = abi.make_args(abi.PJRT_Buffer_ToHostBuffer_Args, src=token.handle)
  with pytest.raises(support.InvalidArgumentError, match="TOKEN"):
    client.plugin.call("Buffer_ToHostBuffer", args)


def test_token_arguments_thread_through(client):
  token = client.compile(_MAKE).execute(
      [client.buffer_from_numpy(np.zeros(3, np.float32))])[1]
  exe = client.compile(_THREAD)
  x = client.buffer_from_numpy(np.array([1, -2, 3], np.float32))
  # A token buffer, or any zero-byte buffer, as JAX passes tokens.
  for tok in (token, client.buffer_from_numpy(np.zeros(0, np.bool_)),
              client.buffer_from_numpy(np.zeros((2, 0), np.float32))):
    same, neg, after = exe.execute([x, tok])
    assert _is_token(same) and _is_token(after)
    np.testing.assert_array_equal(neg.to_numpy(), [-1, 2, -3])


@pytest.mark.parametrize("value", [np.zeros(1, np.bool_), np.float32(0)])
def test_a_token_parameter_refuses_data(client, value):
  exe = client.compile(_THREAD)
  x = client.buffer_from_numpy(np.zeros(3, np.float32))
  with pytest.raises(support.InvalidArgumentError, match="TOKEN"):
    exe.execute([x, client.buffer_from_numpy(value)])


_SHARDED = """
module @sharded attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main(%a: tensor<4xf32> {mhlo.sharding = "{devices=[2]<=[2]}"},
                  %t: !stablehlo.token)
      -> (tensor<4xf32> {mhlo.sharding = "{devices=[2]<=[2]}"},
          !stablehlo.token) {
    %n = stablehlo.negate %a : tensor<4xf32>
    %u = stablehlo.after_all %t : !stablehlo.token
    return %n, %u : tensor<4xf32>, !stablehlo.token
  }
}"""


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="the CPU compiler cannot be imported")
def test_tokens_on_several_devices():
  client = testing.client(backend="cpu", num_devices=2)
  try:
    options = pjrt.compile_options(num_partitions=2,
                                   use_spmd_partitioning=True)
    exe = client.compile(_SHARDED, compile_options=options)
    devices = exe.addressable_devices()
    assert len(devices) == 2
    lists = [[client.buffer_from_numpy(np.array([1, 2], np.float32) + 2 * k,
                                       d),
              client.buffer_from_numpy(np.zeros(0, np.bool_), d)]
             for k, d in enumerate(devices)]
    outs = exe.execute_sharded(lists)
    assert [o[0].to_numpy().tolist() for o in outs] == [[-1, -2], [-3, -4]]
    assert all(_is_token(o[1]) for o in outs)
    # The tokens made there go back in.
    again = exe.execute_sharded([[o[0], o[1]] for o in outs])
    assert [o[0].to_numpy().tolist() for o in again] == [[1, 2], [3, 4]]
  finally:
    client.close()
