"""Real JAX programs (flax, optax, equinox, keras, plain JAX) run on two
platforms and compared: `python -m pjrt.tools.workloads --help`.

Importing this package is cheap: the family modules (and the libraries they
use) load when the registry is first asked for its workloads.
"""
