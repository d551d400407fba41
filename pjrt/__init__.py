"""PJRT: the plugin ABI (PJRT C API compatible), loader, client and plugins."""
