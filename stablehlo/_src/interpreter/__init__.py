"""The StableHLO reference interpreter: numpy kernels registered in the op
registry, run by the dispatch loop in `evaluator`.

Importing this package registers every kernel family.
"""

import importlib

from stablehlo._src.interpreter import checks as _checks  # registers
from stablehlo._src.interpreter import program as _program  # registers
from stablehlo._src.interpreter.evaluator import CheckFailure
from stablehlo._src.interpreter.evaluator import Interpreter
from stablehlo._src.interpreter.evaluator import InterpreterError
from stablehlo._src.interpreter.evaluator import Options
from stablehlo._src.interpreter.evaluator import ResourceExhausted
from stablehlo._src.interpreter.program import register_custom_call

# Kernel families; each registers its kernels when imported.
_FAMILIES = (
    "elementwise",
    "shape",
    "control_flow",
    "reduce",
    "linalg",
    "misc",
    "quantization",
    "collectives",
)
for _f in _FAMILIES:
  importlib.import_module(f"stablehlo._src.interpreter.kernels_{_f}")
