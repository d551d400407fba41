"""HLO IR: opcodes, instructions, computations, modules and the printer."""
