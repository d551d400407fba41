// One dense layer with a ReLU, y = max(x @ w + b, 0), on fixed inputs.
module @mlp {
  func.func public @main() -> tensor<2x3xf32> {
    %x = stablehlo.constant dense<[[1.000000e+00, 2.000000e+00], [-1.000000e+00, 5.000000e-01]]> : tensor<2x2xf32>
    %w = stablehlo.constant dense<[[1.000000e+00, 0.000000e+00, -1.000000e+00], [5.000000e-01, 2.000000e+00, 1.000000e+00]]> : tensor<2x3xf32>
    %b = stablehlo.constant dense<[1.000000e-01, -2.000000e-01, 3.000000e-01]> : tensor<3xf32>
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %2 = stablehlo.add %0, %1 : tensor<2x3xf32>
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<2x3xf32>
    %3 = stablehlo.maximum %2, %zero : tensor<2x3xf32>
    return %3 : tensor<2x3xf32>
  }
}
