"""Compiler services: shape inference, the HLO verifier, name uniquing."""
