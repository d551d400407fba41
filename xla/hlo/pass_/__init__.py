"""HLO pass infrastructure (XLA's xla/hlo/pass/).

The directory is `pass_` because `pass` is a Python keyword and could not be
imported (PEP 8: a trailing underscore avoids a clash with a keyword).
"""
