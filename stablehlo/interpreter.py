"""The StableHLO reference interpreter.

Importing this module registers every kernel family in the op registry
(as importing any part of the interpreter does); `import stablehlo` does not.

    interp = stablehlo.interpreter.Interpreter(module)
    results = interp.call("main", args)
"""

from stablehlo._src.interpreter import CheckFailure as CheckFailure
from stablehlo._src.interpreter import Interpreter as Interpreter
from stablehlo._src.interpreter import InterpreterError as InterpreterError
from stablehlo._src.interpreter import Options as Options
from stablehlo._src.interpreter import register_custom_call as register_custom_call
from stablehlo._src.interpreter import ResourceExhausted as ResourceExhausted

# Modules: `runtime` (values and dtypes), `program` (custom-call targets),
# `process_grid` (the processes of a collective program), `checks` (the
# check dialect's tolerances and comparisons), `prng` (the RNG bit
# generators).
from stablehlo._src.interpreter import checks as checks
from stablehlo._src.interpreter import process_grid as process_grid
from stablehlo._src.interpreter import prng as prng
from stablehlo._src.interpreter import program as program
from stablehlo._src.interpreter import runtime as runtime

# The numpy kernels by family, for evaluators that share the spec's
# semantics (the HLO evaluator computes elementwise, shape, gather / scatter
# and linear-algebra ops with them).
from stablehlo._src.interpreter import kernels_elementwise as kernels_elementwise
from stablehlo._src.interpreter import kernels_elementwise_common as kernels_elementwise_common
from stablehlo._src.interpreter import kernels_elementwise_convert as kernels_elementwise_convert
from stablehlo._src.interpreter import kernels_elementwise_special as kernels_elementwise_special
from stablehlo._src.interpreter import kernels_gather_scatter as kernels_gather_scatter
from stablehlo._src.interpreter import kernels_linalg as kernels_linalg
from stablehlo._src.interpreter import kernels_shape as kernels_shape
