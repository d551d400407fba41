"""StableHLO: the versioned op set, its IR, verifier, text format,
reference interpreter and portable artifacts.

Depends only on `support`. The package exports the IR (`ir`, `types`,
`attributes`); the rest of the public API is in submodules, imported on
demand so that `import stablehlo` stays cheap: `stablehlo.text` (parse /
print), `stablehlo.ops` (op registry), `stablehlo.verify`,
`stablehlo.bytecode`, `stablehlo.vhlo` (portable artifacts),
`stablehlo.interpreter`, `stablehlo.lit` (conformance RUN lines) and
`stablehlo.transforms`.
"""

from stablehlo._src.ir import attributes as attributes
from stablehlo._src.ir import core as ir
from stablehlo._src.ir import types as types
