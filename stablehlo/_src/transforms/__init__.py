"""Module-to-module transformations run by `stablehlo-opt`."""
