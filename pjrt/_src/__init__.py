"""Implementation of pjrt; the public API is re-exported by `pjrt`."""
