"""MLIR bytecode: `reader.read` / `reader.is_bytecode`, and `tree`, the
generic (dialect-agnostic) form a bytecode file is read into."""

from stablehlo._src.bytecode import reader as reader
from stablehlo._src.bytecode import tree as tree
