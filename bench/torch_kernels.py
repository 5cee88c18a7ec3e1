"""Torch's jiterator kernels for the contiguous rows of the benchmark, as compiled on this GPU.

Runs torch's jiterator on the benchmark's contiguous cases (float32, misaligned float32, int8,
uint8, float16, bfloat16) with its kernel cache in a fresh folder, and packs the cubins it wrote
into one tar, so that their SASS can be read (`nvdisasm -c`) next to ours: what torch's kernels
do per thread is a fact to compare, not a guess.

Usage on the GPU machine: python3 bench/torch_kernels.py OUT.tar
"""
from __future__ import annotations

import os
import sys
import tarfile
import tempfile

AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"


def main() -> None:
    target = sys.argv[1]
    folder = tempfile.mkdtemp()
    os.environ["USE_PYTORCH_KERNEL_CACHE"] = "1"
    os.environ["XDG_CACHE_HOME"] = folder  # torch's jiterator writes to $XDG_CACHE_HOME/torch/kernels
    import torch

    fn = torch.cuda.jiterator._create_jit_fn(AXPY, alpha=2)
    n = 1 << 20
    x, y = torch.rand(n + 1, device="cuda"), torch.rand(n + 1, device="cuda")
    fn(x[:n], y[:n], alpha=2)
    fn(x[1:], y[1:], alpha=2)
    for dtype in (torch.int8, torch.uint8, torch.float16, torch.bfloat16):
        fn((x[:n] * 10).to(dtype), (y[:n] * 10).to(dtype), alpha=2)
    torch.cuda.synchronize()
    with tarfile.open(target, "w") as tar:
        tar.add(folder, arcname="torch_kernels")
    for root, _dirs, files in os.walk(folder):
        for name in files:
            print(os.path.join(root, name), os.path.getsize(os.path.join(root, name)))


if __name__ == "__main__":
    main()
