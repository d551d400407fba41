"""HLO-to-HLO transformations (XLA's xla/hlo/transforms/)."""
