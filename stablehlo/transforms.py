"""Module-to-module passes: `chlo_legalize.run(module)` (CHLO to StableHLO)
and `quant_legalize.run(module)` (quantized ops to integer arithmetic)."""

from stablehlo._src.transforms import chlo_legalize as chlo_legalize
from stablehlo._src.transforms import quant_legalize as quant_legalize
