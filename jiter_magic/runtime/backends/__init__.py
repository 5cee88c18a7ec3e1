"""Backends load a built specialization and launch it: `cuda` (CuPy driver API) and `cpu` (ctypes)."""
