"""Our CPU PJRT plugin: the PJRT C API implemented in Python over our compiler.

`api.get_api()` is the plugin's `PJRT_Api` (a ctypes struct whose function
slots are ctypes callbacks); `api.capsule()` wraps it in the "pjrt_c_api"
PyCapsule that JAX takes. See `api.py` for the layout of the package.
"""
