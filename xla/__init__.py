"""The XLA compiler: HLO IR, passes, fusion, buffer assignment, CPU codegen.

Depends only on `support` and `stablehlo`. The layout follows XLA's:

  xla.xla_data, xla.primitive_util   PrimitiveType (proto numbering) and the
                                     data-model messages; numpy dtypes
  xla.shape, xla.layout, xla.shape_util, xla.literal
                                     shapes, layouts and numpy-backed literals
  xla.hlo.ir                         the opcode table, attribute schema,
                                     instructions, computations, modules and
                                     the HLO text printer
  xla.hlo.parser.hlo_parser          XLA's HLO text format -> HloModule
  xla.service                        shape inference, the HLO verifier,
                                     name uniquing
"""
