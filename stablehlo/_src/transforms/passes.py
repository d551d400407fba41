"""The pass table of `stablehlo-opt`: flag name -> (run(module) -> changed,
help). Passes register here by name; the tool runs them in command-line
order."""

from __future__ import annotations

from stablehlo._src.transforms import chlo_legalize
from stablehlo._src.transforms import composite_to_call
from stablehlo._src.transforms import inline
from stablehlo._src.transforms import quant_legalize

PASSES = {
    "inline": (inline.run, "inline calls of functions defined in the "
               "module; drop private functions left unused"),
    "chlo-legalize-to-stablehlo": (chlo_legalize.run, "rewrite CHLO ops "
                                   "into StableHLO ops"),
    "stablehlo-legalize-composite-to-call": (
        composite_to_call.run, "replace stablehlo.composite with a call of "
        "its decomposition"),
    "stablehlo-legalize-quant-to-math": (
        quant_legalize.run, "rewrite uniform quantized types into integer "
        "and float arithmetic on their storage types"),
}
