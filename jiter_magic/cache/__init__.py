"""Compiled kernels on disk (entries, lock) and plans and kernels in memory, with their counters."""
