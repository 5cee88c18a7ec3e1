"""Pure planning of a call: dtypes and promotion, broadcasting and layout, the kernel path, the `KernelSpec`."""
