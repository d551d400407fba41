"""The pretty (custom assembly) form of every op that has one: a table keyed
by op name, one `PrettyForm` (parse fn + print fn) per op.

Ops missing here are parsed and printed in MLIR's generic form. The syntax
follows upstream StableHLO's assembly formats (StablehloOps.td) as they
appear in the conformance corpora. The forms are defined by family, each
family module registering into `pretty_registry`; importing this module
loads every family, so `PRETTY_FORMS` is then complete.
"""

from __future__ import annotations

# pylint: disable=unused-import
from stablehlo._src.text import pretty_misc_ops
from stablehlo._src.text import pretty_ml_program
from stablehlo._src.text import pretty_region_ops
from stablehlo._src.text import pretty_sdy
from stablehlo._src.text import pretty_simple_ops
# pylint: enable=unused-import
from stablehlo._src.text.pretty_registry import PRETTY_FORMS as PRETTY_FORMS
from stablehlo._src.text.pretty_registry import register as register
from stablehlo._src.text.pretty_simple_ops import SAME_TYPE as SAME_TYPE
