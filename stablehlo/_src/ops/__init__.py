"""The op registry (one OpDef per op) and the StableHLO spec verifiers.

Import `registry` for definitions and implementation slots, `verify` for
`verify_op` / `verify_module` / `infer_result_types`.
"""
