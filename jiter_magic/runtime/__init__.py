"""Running a call: dispatch and plan caches, loading kernels, the CUDA and host backends."""
