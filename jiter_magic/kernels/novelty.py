"""What makes a specialization new beside its function's earlier ones, in words for the notebook.

A call may need a new kernel for dtypes already compiled: a broadcast input takes another kernel
path, a Python scalar is passed by value, a transposed view is read through tiles. Named by its
dtypes alone, such a build reads as the same signature compiled twice; these words name the facets
(dtypes, scalar kinds, kernel path, layout, index width) in which it differs from the nearest
earlier specialization, and show that one for comparison.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from jiter_magic.kernels import identity
from jiter_magic.planning.spec import KernelSpec

# Each facet a specialization is told apart by, and how to read it off a spec; in the order named.
FACETS: tuple[tuple[str, Callable[[KernelSpec], object]], ...] = (
    ("dtypes", lambda s: (s.inputs, s.outputs, s.compute, s.extras)),
    ("scalar kinds", lambda s: s.scalar_inputs),
    ("kernel path", lambda s: s.path),
    ("layout", lambda s: (s.ndim, s.params)),
    ("index width", lambda s: s.index64),
)


def differing_facets(spec: KernelSpec, other: KernelSpec) -> list[str]:
    """The names of the facets in which `spec` differs from `other` ([] when they are equal); another
    kernel path has another layout record, so its layout is not named apart."""
    names = [name for name, facet in FACETS if facet(spec) != facet(other)]
    return [n for n in names if n != "layout"] if "kernel path" in names else names


def novelty(spec: KernelSpec, earlier: Sequence[KernelSpec]) -> str:
    """'new scalar kinds; #0 is (float32, float32) -> (float32), contiguous vec1', or '' for a
    function's first specialization. The nearest earlier one differs in the fewest facets (the
    newest among equals); a spec equal to an earlier one (built again for another device, or after
    its kernel left the memory cache) says so."""
    if not earlier:
        return ""
    index = min(range(len(earlier)), key=lambda i: (len(differing_facets(spec, earlier[i])), -i))
    facets = differing_facets(spec, earlier[index])
    if not facets:
        return f"the same as #{index}"
    return f"new {_joined(facets)}; #{index} is {identity(earlier[index])}"


def _joined(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
