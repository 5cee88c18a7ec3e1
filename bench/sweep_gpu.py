"""Tuning sweep for the contiguous path: threads a block and vectors a thread, per dtype.

Patches the module constants the generator and launcher read, rebuilds, and times each
variant with CUDA events; the chosen defaults in jiter_magic/plan.py come from this.
"""
from __future__ import annotations

import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402
from jiter_magic import plan  # noqa: E402
from jiter_magic.backends import cuda as cuda_backend  # noqa: E402
from jiter_magic.codegen import kernel  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpu import timed  # noqa: E402

AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
CODE8 = "template <typename T> T f(T a, T b, T c, T d, T e, T g, T h, T i) { return a + b + c + d + e + g + h + i; }"


def set_constants(block: int, unroll: int) -> None:
    for module in (plan, kernel, cuda_backend):
        module.BLOCK = block
        module.UNROLL = unroll


def main() -> None:
    cases = []
    for dtype in (torch.float32, torch.float16, torch.float64):
        n = (1 << 30) // torch.empty((), dtype=dtype).element_size()
        cases.append((f"axpy {dtype}", AXPY, [torch.rand(n, device="cuda").to(dtype) for _ in range(2)], 3))
    k = 1 << 26
    cases.append(("8 inputs f32", CODE8, [torch.rand(k, device="cuda") for _ in range(8)], 9))
    for block, unroll in itertools.product((128, 256, 512), (1, 2, 4, 8)):
        set_constants(block, unroll)
        for name, code, xs, arrays in cases:
            fn = jiter_magic.create_jit_fn(code + f"// {block} {unroll}", **({"alpha": 2.0} if "alpha" in code else {}))
            seconds = timed(lambda: fn(*xs), reps=30)
            gbps = arrays * xs[0].numel() * xs[0].element_size() / seconds / 1e9
            print(f"block {block:4d} unroll {unroll}  {name:28s} {gbps:7.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
