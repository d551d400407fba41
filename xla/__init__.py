"""The XLA compiler: HLO IR, passes, fusion, buffer assignment, CPU codegen.

Depends only on `support` and `stablehlo`.
"""
