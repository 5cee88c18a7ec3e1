"""SASS of torch's jiterator beside jiter_magic's for the same functor and dtype (needs a GPU for torch).

torch's jiterator writes each cubin it compiles into PYTORCH_KERNEL_CACHE_PATH; this script points
that at a fresh folder, calls both jiterators on the math-heavy row and on `-x + alpha*y` in small
dtypes, disassembles every cubin with nvdisasm, and writes one listing a kernel with a summary
(registers, instructions by opcode) into --out. Used to compare precise against approximate
functions, registers and unrolling (issue 30 item 4).
Usage: python3 bench/sass_compare.py --out DIR
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

CACHE = tempfile.mkdtemp(prefix="torch-kernels-")
os.environ["PYTORCH_KERNEL_CACHE_PATH"] = CACHE  # read when torch's jiterator first compiles

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402
from bench_gpu import AXPY, MATH  # noqa: E402

_OPCODE = re.compile(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def nvdisasm() -> str:
    found = shutil.which("nvdisasm") or "/usr/local/cuda/bin/nvdisasm"
    if not os.path.exists(found):
        import nvidia.cuda_nvdisasm  # the pip wheel

        found = os.path.join(os.path.dirname(nvidia.cuda_nvdisasm.__file__), "bin", "nvdisasm")
    return found


def summary(sass: str) -> str:
    ops = collections.Counter(op.split(".")[0] for op in _OPCODE.findall(sass))
    top = ", ".join(f"{op} {n}" for op, n in ops.most_common(40))
    return f"// {sum(ops.values())} instructions: {top}\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    calls = [("math", MATH, {}, torch.float32), ("math", MATH, {}, torch.float16),
             ("axpy", AXPY, {"alpha": 2.0}, torch.float16), ("axpy", AXPY, {"alpha": 2}, torch.int8),
             ("axpy", AXPY, {"alpha": 2}, torch.uint8), ("axpy", AXPY, {"alpha": 2.0}, torch.float32)]
    tool = nvdisasm()
    for name, code, kwargs, dtype in calls:
        x = (torch.rand(1 << 20, device="cuda") * 10).to(dtype)
        y = (torch.rand(1 << 20, device="cuda") * 10).to(dtype)
        ours = jiter_magic.create_jit_fn(code, **kwargs)
        ours(x, y)
        torch.cuda.jiterator._create_jit_fn(code, **kwargs)(x, y)
        ours_sass = ours.inspect(x, y, kind="sass")
        with open(os.path.join(out, f"ours-{name}-{str(dtype)[6:]}.sass"), "w") as f:
            f.write(summary(ours_sass) + ours_sass)
        if name == "axpy" and dtype == torch.float32:  # a stride-2 view: the strided path
            xs, ys = x[::2], y[::2]
            ours(xs, ys)
            torch.cuda.jiterator._create_jit_fn(code, **kwargs)(xs, ys)
    for entry in sorted(os.listdir(CACHE)):
        path = os.path.join(CACHE, entry)
        sass = subprocess.run([tool, "--print-code", "--print-raw", path], capture_output=True, text=True)
        text = sass.stdout or sass.stderr
        cuobjdump = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
        regs = ""
        if os.path.exists(cuobjdump):  # registers and shared memory of each function
            usage = subprocess.run([cuobjdump, "--dump-resource-usage", path], capture_output=True, text=True)
            regs = "".join(f"// {line}\n" for line in usage.stdout.splitlines() if "REG" in line)
        with open(os.path.join(out, f"torch-{entry[:60]}.sass"), "w") as f:
            f.write(summary(text) + regs + text)
    print("wrote", sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
