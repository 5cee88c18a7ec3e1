"""Tuning sweep for the contiguous path: elements a thread and the widest vector, per case.

Patches how the contiguous path picks its vector and its unroll (jiter_magic/kernels/contiguous.py
and kernels/base.py), builds a fresh function per variant, and times each with CUDA events next to
torch's jiterator on the same tensors, so the table reads as "ours / torch" per variant. The
defaults in kernels/contiguous.py come from this.

Usage on the GPU machine: python3 bench/sweep_gpu.py [--quick]
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402
from jiter_magic.dtypes import DTYPES  # noqa: E402
from jiter_magic.kernels import base, contiguous  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpu import timed  # noqa: E402

AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
CODE8 = "template <typename T> T f(T a, T b, T c, T d, T e, T g, T h, T i) { return a + b + c + d + e + g + h + i; }"
ORIGINAL_UNROLL = contiguous.unroll_of


def set_policy(widest: int, per_thread_bytes: int | None) -> None:
    """Vectors of at most `widest` elements; a thread moves `per_thread_bytes` of its widest operand
    (None: the shipped policy)."""

    def widest_vector(dtypes: list[str]) -> int:
        return max(1, min(widest, 16 // max(DTYPES[d].itemsize for d in dtypes)))

    def unroll_of(spec) -> int:
        if per_thread_bytes is None:
            return ORIGINAL_UNROLL(spec)
        dtypes = [*spec.outputs, *(spec.inputs[i] for i in spec.array_inputs)]
        size = max(DTYPES[d].itemsize for d in dtypes)
        return max(1, per_thread_bytes // (spec.vec * size))

    base.widest_vector = widest_vector
    contiguous.widest_vector = widest_vector
    contiguous.unroll_of = unroll_of


def cases() -> list:
    found = []
    n = 1 << 28
    x, y = torch.rand(n + 1, device="cuda"), torch.rand(n + 1, device="cuda")
    found.append(("f32 contiguous", AXPY, [x[:n], y[:n]], 12 * n))
    found.append(("f32 misaligned x[1:]", AXPY, [x[1:], y[1:]], 12 * n))
    for dtype in (torch.int8, torch.float16):
        m = (1 << 30) // torch.empty((), dtype=dtype).element_size()
        xs = [(torch.rand(m, device="cuda") * 10).to(dtype) for _ in range(2)]
        found.append((f"{str(dtype)[6:]} contiguous", AXPY, xs, 3 * m * xs[0].element_size()))
    k = 1 << 26
    found.append(("8 inputs f32", CODE8, [torch.rand(k, device="cuda") for _ in range(8)], 36 * k))
    return found


def main() -> None:
    quick = "--quick" in sys.argv
    variants = [(8, None), (16, None), (8, 32), (16, 32), (8, 64), (16, 64)] if not quick else [(8, None), (16, 32)]
    all_cases = cases()
    refs = {}
    for name, code, xs, _ in all_cases:
        refs[name] = torch.cuda.jiterator._create_jit_fn(code, **({"alpha": 2} if "alpha" in code else {}))
    for round_ in range(2):
        for widest, per_thread in variants:
            set_policy(widest, per_thread)
            for name, code, xs, moved in all_cases:
                kwargs = {"alpha": 2} if "alpha" in code else {}
                fn = jiter_magic.create_jit_fn(code + f"\n// {widest} {per_thread}", **kwargs)
                ours = timed(lambda: fn(*xs, **kwargs), reps=20)
                ref = timed(lambda: refs[name](*xs, **kwargs), reps=20)
                vec = fn.specializations[-1].spec.vec
                print(f"round {round_} widest {widest:2d} thread_bytes {per_thread!s:4s} {name:22s} vec{vec:<2d} "
                      f"{moved / ours / 1e9:6.0f} GB/s  torch {moved / ref / 1e9:6.0f}  ratio {ref / ours:5.3f}",
                      flush=True)


if __name__ == "__main__":
    main()
