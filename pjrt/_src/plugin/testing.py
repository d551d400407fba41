"""Test helpers for the plugin's tests: the plugin, clients, programs."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

import pjrt
from pjrt._src.plugin import api

NAME = "openxla_cpu"

ADD_F32 = """
module @add {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

# a + b, with %a donated to the result (as JAX marks a donated argument).
ADD_DONATING = """
module @add_donating {
  func.func @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32},
                  %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

# Sum over each replica's argument, across all replicas.
ALL_REDUCE_2 = """
module @all_reduce {
  func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "stablehlo.all_reduce"(%a) ({
      ^bb0(%x: tensor<f32>, %y: tensor<f32>):
        %s = stablehlo.add %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}
        : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
"""


def while_loop(iterations: int) -> str:
  """A program that counts to `iterations` (slow on the interpreter)."""
  return f"""
module @count {{
  func.func @main(%x: tensor<i64>) -> tensor<i64> {{
    %limit = stablehlo.constant dense<{iterations}> : tensor<i64>
    %one = stablehlo.constant dense<1> : tensor<i64>
    %r = stablehlo.while(%i = %x) : tensor<i64>
      cond {{
        %c = stablehlo.compare LT, %i, %limit : (tensor<i64>, tensor<i64>)
            -> tensor<i1>
        stablehlo.return %c : tensor<i1>
      }} do {{
        %n = stablehlo.add %i, %one : tensor<i64>
        stablehlo.return %n : tensor<i64>
      }}
    return %r : tensor<i64>
  }}
}}
"""


def plugin() -> pjrt.Plugin:
  return pjrt.load_plugin(api.get_api(), name=NAME)


def client(backend: str = "interpreter", num_devices: int = 4,
           **options: Any) -> pjrt.Client:
  return pjrt.Client(plugin(), {"backend": backend,
                                "num_devices": num_devices, **options})


def call(c: pjrt.Client, slot: str, **fields: Any) -> Any:
  """Calls `slot` of the plugin (raising its error as a support error)."""
  return c.plugin.call(slot, **fields)


def string(pointer: int | None, size: int) -> str:
  return ctypes.string_at(pointer, size).decode() if size else ""


def ones(c: pjrt.Client, shape=(4,), dtype=np.float32, device=None):
  return c.buffer_from_numpy(np.ones(shape, dtype), device)
