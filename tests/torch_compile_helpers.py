"""What the torch.compile tests of elementwise functions and of reductions share (tests/ is on
sys.path: pyproject's pytest `pythonpath`)."""
from __future__ import annotations

import torch


class GraphRecorder:
    """A torch.compile backend that keeps the FX graphs it is given and runs them as they are."""

    def __init__(self) -> None:
        self.graphs: list = []

    def __call__(self, graph_module, example_inputs):
        self.graphs.append(graph_module)
        return graph_module.forward

    def operators(self) -> list[str]:
        return [str(node.target) for g in self.graphs for node in g.graph.nodes
                if node.op == "call_function" and "jiter_magic" in str(node.target)]


def causes(error: BaseException | None) -> list[BaseException]:
    """The error and those it was raised from (torch.compile wraps the errors raised while tracing)."""
    chain = []
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    return chain


def same(result, expected, tolerance: float = 1e-6) -> None:
    """Equal values (within `tolerance`), dtype, shape and strides."""
    assert result.dtype == expected.dtype
    assert result.shape == expected.shape
    assert result.stride() == expected.stride()
    torch.testing.assert_close(result, expected, rtol=tolerance, atol=tolerance)


def assert_compiled_gradients_are_eager(loss, inputs, backend: str = "inductor") -> None:
    """The gradients of `loss(*inputs)` through torch.compile (fullgraph) equal the eager ones, each
    of its input's shape (an input the call broadcast gets its gradient summed back)."""
    eager = [t.clone().requires_grad_() for t in inputs]
    loss(*eager).backward()
    compiled_inputs = [t.clone().requires_grad_() for t in inputs]
    torch.compile(loss, backend=backend, fullgraph=True)(*compiled_inputs).backward()
    for got, want in zip(compiled_inputs, eager):
        assert got.grad.shape == want.grad.shape
        torch.testing.assert_close(got.grad, want.grad)
