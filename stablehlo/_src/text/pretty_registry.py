"""The table of pretty (custom assembly) forms, keyed by op name.

A leaf module: each family module (`pretty_simple_ops`, `pretty_misc_ops`,
`pretty_region_ops`, `pretty_ml_program`) registers its forms here when it is
imported; `pretty_ops` imports every family, so the parser and printer read
the complete table through it.
"""

from __future__ import annotations

from stablehlo._src.text.pretty_common import PrettyForm

PRETTY_FORMS: dict[str, PrettyForm] = {}


def register(name: str, form: PrettyForm) -> None:
  if name in PRETTY_FORMS:
    raise ValueError(f"pretty form for '{name}' registered twice")
  PRETTY_FORMS[name] = form
