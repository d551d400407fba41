"""A consumer's program using the vendored StableHLO IR and support layer."""

import sys

import stablehlo
from stablehlo import ir
from stablehlo import types
import support


def build_module():
  """Builds `func @main(%a, %b) { return stablehlo.add(%a, %b) }` in IR."""
  module = ir.Module(ir.Operation("builtin.module",
                                  regions=[ir.Region([ir.Block()])]))
  f32 = types.RankedTensorType((2, 2), types.f32)
  body = ir.Block([f32, f32])
  add = body.append(ir.Operation("stablehlo.add", body.arguments, [f32]))
  body.append(ir.Operation("func.return", [add.result]))
  func = ir.Operation(
      "func.func", regions=[ir.Region([body])],
      attributes={"sym_name": stablehlo.attributes.StringAttr("main")})
  module.body.append(func)
  return module


def main() -> int:
  module = build_module()
  ops = [op.name for op in module.walk()]
  print("vendored stablehlo ok:", " -> ".join(ops))
  try:
    import xla  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    print("xla is not vendored here, as intended")
  status = support.Status(support.StatusCode.OK)
  print("status:", status)
  return 0


if __name__ == "__main__":
  sys.exit(main())
