"""HLO: the compiler's IR (`xla.hlo.ir`) and its text format
(`xla.hlo.parser`)."""
