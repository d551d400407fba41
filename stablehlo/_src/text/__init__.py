"""MLIR text format for StableHLO programs: parser, printer, diagnostics.

    module = parse_module(text, filename="prog.mlir")
    text = print_module(module)                  # pretty form, as upstream
    text = print_module(module, generic=True)    # MLIR generic form
    text = print_module(module, keep_source_names=True)  # %x, not %arg0

The printer names values as upstream MLIR does (`%0`, `%arg0`, `%cst_1`,
`%iterArg`) and spells numbers as it does, so its text equals jaxlib's
print of the same module.
"""

from stablehlo._src.text.diagnostics import InputCase as InputCase
from stablehlo._src.text.diagnostics import ParseError as ParseError
from stablehlo._src.text.diagnostics import split_input_file as split_input_file
from stablehlo._src.text.parser import parse_module as parse_module
from stablehlo._src.text.pretty_ops import PRETTY_FORMS as PRETTY_FORMS
from stablehlo._src.text.printer import print_module as print_module


def _register_pretty_forms() -> None:
  """Records in the op registry which ops have a pretty (custom) syntax."""
  from stablehlo._src.ops import registry  # pylint: disable=g-import-not-at-top
  for name in PRETTY_FORMS:
    if registry.lookup(name) is not None:
      registry.set_pretty(name, "custom")


_register_pretty_forms()
