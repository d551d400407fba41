"""The numpy HLO evaluator (see hlo_evaluator.py)."""
