"""StableHLO: the versioned op set, its IR, verifier, text format,
reference interpreter and portable artifacts.

Depends only on `support`.
"""

from stablehlo._src.ir import attributes as attributes
from stablehlo._src.ir import core as ir
from stablehlo._src.ir import types as types
