"""The MLIR text format of StableHLO programs: parse, print, diagnostics.

    module = stablehlo.text.parse_module(src, filename="prog.mlir")
    src = stablehlo.text.print_module(module)

Importing this module loads the parser and printer, not the interpreter.
"""

from stablehlo._src.text import InputCase as InputCase
from stablehlo._src.text import ParseError as ParseError
from stablehlo._src.text import parse_module as parse_module
from stablehlo._src.text import print_module as print_module
from stablehlo._src.text import split_input_file as split_input_file
from stablehlo._src.text.attr_printer import format_attr as format_attr
# The numpy dtype of an element type, or None where numpy has none.
from stablehlo._src.text.dense import numpy_dtype as numpy_dtype
