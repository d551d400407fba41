"""StableHLO programs the conformance suite compiles, as MLIR text.

Every PJRT plugin that accepts the "mlir" program format must parse MLIR
text (bytecode is optional for the suite), so the programs are kept as text
and use only long-stable StableHLO ops. Each program's `main` is the entry.
"""

ADD_F32 = """
module @cts_add {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

DOT_F32 = """
module @cts_dot {
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>)
      -> tensor<2x4xf32> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
        : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
"""

# Sum over dimension 1 of a 3x5 array.
REDUCE_SUM_F32 = """
module @cts_reduce {
  func.func @main(%a: tensor<3x5xf32>) -> tensor<3xf32> {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = stablehlo.reduce(%a init: %zero) across dimensions = [1]
        : (tensor<3x5xf32>, tensor<f32>) -> tensor<3xf32>
      reducer(%x: tensor<f32>, %y: tensor<f32>) {
        %s = stablehlo.add %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }
    return %0 : tensor<3xf32>
  }
}
"""

# Two outputs of different types, one of them a scalar constant.
MULTIPLY_I32_AND_CONSTANT = """
module @cts_two_outputs {
  func.func @main(%a: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<f64>) {
    %0 = stablehlo.multiply %a, %a : tensor<2x3xi32>
    %1 = stablehlo.constant dense<2.5> : tensor<f64>
    return %0, %1 : tensor<2x3xi32>, tensor<f64>
  }
}
"""

# No parameters at all.
CONSTANT_ONLY = """
module @cts_constant {
  func.func @main() -> tensor<2xi32> {
    %0 = stablehlo.constant dense<[7, -7]> : tensor<2xi32>
    return %0 : tensor<2xi32>
  }
}
"""

# -- Invalid programs: each must be rejected with an error, never a crash. ---

NOT_MLIR = "this is not an MLIR program"

BINARY_GARBAGE = bytes(range(256)) * 4

NO_MAIN = """
module @cts_no_main {
  func.func @other(%a: tensor<4xf32>) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }
}
"""

UNKNOWN_OP = """
module @cts_unknown_op {
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.no_such_op %a : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

# Parses, but fails verification: operand shapes differ.
SHAPE_MISMATCH = """
module @cts_shape_mismatch {
  func.func @main(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

# The declared result type disagrees with what `return` returns.
WRONG_RETURN_TYPE = """
module @cts_wrong_return {
  func.func @main(%a: tensor<4xf32>) -> tensor<4xi32> {
    return %a : tensor<4xf32>
  }
}
"""
