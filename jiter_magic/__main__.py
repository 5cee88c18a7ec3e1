"""`python -m jiter_magic`: run the seed examples on whatever this machine has, and show the cache.

The quickest proof that an installation works: it compiles and runs the documentation's
examples on CUDA tensors when a GPU is present and on CPU tensors otherwise, and says whether the
C call path built at install is in use, or why not.
"""
from __future__ import annotations

import json
import warnings


def main() -> None:
    import torch

    import jiter_magic
    from jiter_magic import create_jit_fn

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"jiter_magic {jiter_magic.__version__}: running the seed examples on {device}")

    code_string = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
    jitted_fn = create_jit_fn(code_string, alpha=1.0)
    a = torch.rand(3, device=device)
    b = torch.rand(3, device=device)
    result = jitted_fn(a, b, alpha=3.14)
    print("my_kernel(a, b, alpha=3.14) =", result.tolist(), "| torch:", (-a + 3.14 * b).tolist())

    code_string = "template <typename T> T util_fn(T x, T y) { return ::sin(x) + ::cos(y); }"
    code_string += "template <typename T> T my_kernel(T x, T y, T val) { return ::min(val, util_fn(x, y)); }"
    jitted_fn = create_jit_fn(code_string, val=0.0)
    print("min(val, sin(a) + cos(b)) =", jitted_fn(a, b).tolist())

    code_string = "template <typename T> T my_gelu(T a) { return a > 0 ? a : 0; }"
    my_gelu = create_jit_fn(code_string)
    my_lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # torch warns that gelu's kernel is replaced: that is the point
        warnings.simplefilter("ignore", UserWarning)
        my_lib.impl("aten::gelu", my_gelu, "CUDA" if device == "cuda" else "CPU")
    x = torch.rand(3, device=device) - 0.5
    same = torch.allclose(torch.nn.functional.gelu(x), torch.nn.functional.relu(x))
    print("gelu overridden by a jitted relu:", same)
    my_lib._destroy()
    from jiter_magic.native import call_path

    # Built at install (setup.py): loaded already by the calls above. Where a module is missing its
    # status is the one line that says why (no compiler, no Python.h or no torch at install).
    call_path.load()
    print(f"C call path: {call_path.status()}; its torch module: {call_path.torch_status()}")
    print("cache:", json.dumps(jiter_magic.cache_stats(), indent=1))


if __name__ == "__main__":
    main()
