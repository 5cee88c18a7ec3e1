"""Tools over the public API: benchmarking a call against a copy and a reference, and sweeps."""
