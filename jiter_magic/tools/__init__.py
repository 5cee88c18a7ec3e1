"""Tools over the public API: benchmarking, inspection of generated sources, compiled code as text."""
