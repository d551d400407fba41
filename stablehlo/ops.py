"""The op registry: `registry` holds one definition per op and its
implementation slots (interpreter kernel, HLO lowering, pretty syntax);
`typeutil` formats and inspects element types. The verifiers are in
`stablehlo.verify`."""

from stablehlo._src.ops import registry as registry
from stablehlo._src.ops import typeutil as typeutil
