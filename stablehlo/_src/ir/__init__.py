"""StableHLO IR data model: types, attributes, and program structure."""
