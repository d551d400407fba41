"""Generic MLIR bytecode reading and writing (portable artifacts)."""
