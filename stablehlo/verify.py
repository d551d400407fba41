"""The StableHLO spec verifiers: `verify_module(module)`, `verify_op(op)`,
and the result-type inference the verifiers share."""

from stablehlo._src.ops.verify import infer_result_types as infer_result_types
from stablehlo._src.ops.verify import VerificationError as VerificationError
from stablehlo._src.ops.verify import verify_module as verify_module
from stablehlo._src.ops.verify import verify_op as verify_op
