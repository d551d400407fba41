"""Passes that simplify HLO without changing its meaning: dead code
elimination, common subexpression elimination, algebraic simplification."""
