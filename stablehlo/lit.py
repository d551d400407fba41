"""The RUN lines of conformance corpus files (lit syntax), and running them
through the interpreter as `stablehlo-translate --interpret` would."""

from stablehlo._src.interpreter.lit import Invocation as Invocation
from stablehlo._src.interpreter.lit import invocations as invocations
from stablehlo._src.interpreter.lit import is_enabled as is_enabled
from stablehlo._src.interpreter.lit import LitFailure as LitFailure
from stablehlo._src.interpreter.lit import run_file_cases as run_file_cases
from stablehlo._src.interpreter.lit import run_lines as run_lines
from stablehlo._src.interpreter.lit import split as split
