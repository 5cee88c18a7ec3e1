"""One scan row's kernels under Nsight Compute: a call made once warm, then profiled.

bench_scan.py says how fast a row runs; this says why, with ncu's sections (speed of light,
occupancy, launch statistics, warp states, memory) for each kernel of one call, after a first
call has compiled and loaded the kernels. `torch` as the op profiles torch's own (CUB's scan
for a cumsum) on the same inputs.

Usage on the GPU machine:
  ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats \\
      --section WarpStateStats --section MemoryWorkloadAnalysis \\
      python3 bench/profile_scan.py linear 1,64,262144 [torch]
"""
from __future__ import annotations

import sys

import torch
from bench_scan import CUMSUM, LINEAR, make_inputs


def main() -> None:
    op, shape = sys.argv[1], tuple(int(n) for n in sys.argv[2].split(","))
    inputs = make_inputs(op, shape, "cuda")
    if len(sys.argv) > 3 and sys.argv[3] == "torch":
        def call() -> object:
            return torch.cumsum(inputs[0], -1)
    elif op == "linear":
        def call() -> object:
            return LINEAR(*inputs, dim=-1)
    else:
        def call() -> object:
            return CUMSUM(inputs[0], dim=-1)
    for _ in range(2):  # compiles and loads, then runs warm
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
