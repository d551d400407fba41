"""Translations into HLO (StableHLO -> HLO import)."""
