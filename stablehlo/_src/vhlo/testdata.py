"""Shared test programs of the portable-artifact tests.

`USE_LIST_PROGRAMS` maps a name to (program, the use-list order records
jaxlib 0.10.2 (StableHLO 1.17.0) writes for it at target 1.8.0, where it
downgrades `exponential_v2` to v1), read from jaxlib's artifacts with our
bytecode reader.
"""

from __future__ import annotations

from stablehlo._src.bytecode import reader

USE_LIST_PROGRAMS = {
    "result_used_twice": (
        "func.func @main(%a: tensor<f32>) -> tensor<f32> {\n"
        "  %0 = stablehlo.exponential %a : tensor<f32>\n"
        "  %1 = stablehlo.add %0, %0 : tensor<f32>\n"
        "  return %1 : tensor<f32>\n}",
        [("vhlo.exponential_v1", [(0, False, (1, 0))])]),
    "argument_and_result": (
        "func.func @main(%a: tensor<f32>) -> (tensor<f32>, tensor<f32>) {\n"
        "  %0 = stablehlo.exponential %a : tensor<f32>\n"
        "  %1 = stablehlo.add %a, %0 : tensor<f32>\n"
        "  %2 = stablehlo.exponential %1 : tensor<f32>\n"
        "  return %0, %2 : tensor<f32>, tensor<f32>\n}",
        [("block", [(0, False, (1, 0))]),
         ("vhlo.exponential_v1", [(0, False, (1, 0))])]),
    "interleaved": (
        "func.func @main(%a: tensor<f32>) -> (tensor<f32>, tensor<f32>) {\n"
        "  %0 = stablehlo.add %a, %a : tensor<f32>\n"
        "  %1 = stablehlo.exponential %a : tensor<f32>\n"
        "  %2 = stablehlo.add %1, %a : tensor<f32>\n"
        "  %3 = stablehlo.exponential %a : tensor<f32>\n"
        "  return %2, %3 : tensor<f32>, tensor<f32>\n}",
        [("block", [(0, False, (0, 2, 1, 3, 4))])]),
    "nested_region": (
        "func.func @main(%a: tensor<4xf32>) -> tensor<f32> {\n"
        "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %0 = stablehlo.reduce(%a init: %c) across dimensions = [0] : "
        "(tensor<4xf32>, tensor<f32>) -> tensor<f32>\n"
        "    reducer(%x: tensor<f32>, %y: tensor<f32>) {\n"
        "      %e = stablehlo.exponential %c : tensor<f32>\n"
        "      %s = stablehlo.add %x, %e : tensor<f32>\n"
        "      stablehlo.return %s : tensor<f32>\n"
        "    }\n"
        "  %1 = stablehlo.add %0, %c : tensor<f32>\n"
        "  return %1 : tensor<f32>\n}",
        [("vhlo.constant_v1", [(0, False, (1, 0, 2))])]),
}


def use_list_records(data: bytes) -> list:
  """(op name or "block", records) for each op/block that has records."""
  out = []
  for op in reader.read(data).ops():
    if op.use_list_orders:
      out.append((op.name, op.use_list_orders))
    for region in op.regions:
      for block in region.blocks:
        if block.use_list_orders:
          out.append(("block", block.use_list_orders))
  return out
