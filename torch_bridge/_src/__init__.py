"""Implementation of torch_bridge; import the public API from torch_bridge."""
