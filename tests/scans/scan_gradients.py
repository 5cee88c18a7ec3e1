"""Scans with their gradients, as docs/scans.md writes them: a cumsum's and a linear recurrence's
backward (whole, and of h alone), module-level functions so that pickling and torch.compile store
them by reference."""
from __future__ import annotations

import torch
from scan_functions import ADD, AFFINE, EMA, KEEP_MAX

from jiter_magic import create_multi_output_scan_fn, create_scan_fn

cumsum = create_scan_fn(ADD, 0, combine="add")
linear = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine")
linear_h = create_multi_output_scan_fn(AFFINE, (1, 0), combine="affine", outputs=(1,))  # h alone
cummax = create_multi_output_scan_fn(KEEP_MAX, float("-inf"), combine="keep_max")
ema = create_multi_output_scan_fn(EMA, (1, 0), map="ema", combine="affine", decay=0.9)  # no backward


def cumsum_backward(x, result, grad, *, dim, reverse, exclusive):
    """Each input element adds to the results after it: the gradient scanned the other way."""
    return cumsum(grad, dim=dim, reverse=not reverse, exclusive=exclusive)


def step(x, dim, later, reverse, fill):
    """`x` moved one element along the scan's order: each position gets the next element's value
    (`later`) or the previous one's, `fill` at the edge."""
    n = x.shape[dim]
    edge = torch.full_like(x.narrow(dim, 0, 1), fill)
    if later != reverse:
        return torch.cat([x.narrow(dim, 1, n - 1), edge], dim)
    return torch.cat([edge, x.narrow(dim, 0, n - 1)], dim)


def linear_backward(a, b, products, h, grad_products, grad_h, *, dim, reverse, exclusive):
    """h[t] = a[t] h[t-1] + b[t]: the reversed recurrence g[t] = a[t+1] g[t+1] + dh[t] gives db = g
    and da[t] = g[t] h[t-1]; the products' gradient adds q[t] p[t-1] by the same recurrence."""
    if exclusive:  # each result is the state before its element: the inclusive one a step earlier
        products_before, h_before = products, h
        grad_products, grad_h = (step(g, dim, True, reverse, 0) for g in (grad_products, grad_h))
    else:
        products_before, h_before = step(products, dim, False, reverse, 1), step(h, dim, False, reverse, 0)
    a_next = step(a, dim, True, reverse, 0)
    _, g = linear(a_next, grad_h, dim=dim, reverse=not reverse)
    _, q = linear(a_next, grad_products, dim=dim, reverse=not reverse)
    return g * h_before + q * products_before, g


def linear_h_backward(a, b, h, grad_h, *, dim, reverse, exclusive):
    """h alone (outputs=(1,)): its backward gets h and its gradient only, and needs no products:
    g[t] = a[t+1] g[t+1] + dh[t] is the h-only recurrence reversed, db = g and da[t] = g[t] h[t-1]."""
    if exclusive:  # result t is h[t-1]: its gradient is h's a step later, and it is h_before itself
        h_before, grad_h = h, step(grad_h, dim, True, reverse, 0)
    else:
        h_before = step(h, dim, False, reverse, 0)
    (g,) = linear_h(step(a, dim, True, reverse, 0), grad_h, dim=dim, reverse=not reverse)
    return g * h_before, g


def cummax_backward(x, values, indices, grad_values, grad_indices, *, dim, reverse, exclusive):
    """Each result's gradient goes to the element it was taken from (its index), as torch.cummax's."""
    return torch.zeros_like(grad_values).scatter_add(dim, indices, grad_values)


cumsum.def_backward(cumsum_backward)
linear.def_backward(linear_backward)
linear_h.def_backward(linear_h_backward)
cummax.def_backward(cummax_backward)
