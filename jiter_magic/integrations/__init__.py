"""Integrations above the core: torch.compile operators, DTensor, Dask."""
