"""The rows of bench_cpu.py: an expression, its inputs, its contenders and what they are checked against.

Each row is one expression written three ways: a jiter_magic functor, a Python function of its
inputs that NumPy arrays and torch tensors both evaluate (NumPy, torch eager, and Inductor through
`torch.compile(..., dynamic=False)`), and, where they can express it, a numexpr string and a numba
`@vectorize(target="parallel")` function. A contender that cannot do a row is left out of it with
the reason, which the table prints; numexpr and numba are left out everywhere when not installed.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

import jiter_magic

try:
    import numexpr
except ImportError:
    numexpr = None
try:
    import numba
except ImportError:
    numba = None

N = 1 << 24
SIDE = 4096

FUSED = "template <typename T> T fused(T a, T x, T y, T z) { return a * x * y + z; }"
MATH = ("template <typename T> T mathy(T x, T y) "
        "{ return ::sin(x) * ::exp(-y * y) + ::erf(x * y) / (T(1) + ::tanh(x)); }")
TWICE_PLUS = "template <typename T> T twice_plus(T x, T y) { return 2 * x + y; }"
MUL = "template <typename T> T mul(T x, T y) { return x * y; }"


def fused(a, x, y, z):
    return a * x * y + z


def mathy(x, y):
    return torch.sin(x) * torch.exp(-y * y) + torch.erf(x * y) / (1 + torch.tanh(x))


def mathy_scalar(x, y):  # numba's version of one element
    return math.sin(x) * math.exp(-y * y) + math.erf(x * y) / (1 + math.tanh(x))


def twice_plus(x, y):
    return 2 * x + y


def mul(x, y):
    return x * y


NO_ERF = "no erf"


@dataclass
class Row:
    name: str
    bytes_moved: int  # inputs read and output written once
    contenders: dict[str, Callable[[], object]]
    expected: torch.Tensor  # computed in float64 (int64 for integers) from the same inputs
    dtype: str  # the result's dtype every contender must return
    tolerance: tuple[float, float]  # rtol, atol against `expected`
    omitted: dict[str, str] = field(default_factory=dict)


def build(name: str, code: str, expr, tensors: list[torch.Tensor], *, numpy_why: str | None = None,
          numexpr_src: str | None = None, numexpr_why: str = "", numba_fn=None, numba_sig: str = "",
          numba_why: str = "", tolerance=(1e-5, 1e-6), out: bool = False) -> Row:
    """A row whose contenders all compute `expr` on `tensors` (NumPy on their .numpy() views)."""
    fn = jiter_magic.create_jit_fn(code)
    result = torch.broadcast_shapes(*(t.shape for t in tensors))
    dtype = tensors[0].dtype
    size = torch.empty((), dtype=dtype).element_size()
    bytes_moved = size * (sum(t.numel() for t in tensors) + math.prod(result))
    contenders: dict[str, Callable[[], object]] = {}
    omitted: dict[str, str] = {}
    arrays = None if dtype == torch.bfloat16 else [t.numpy() for t in tensors]
    if arrays is not None:
        contenders["jiter_magic (NumPy arrays)"] = lambda: fn(*arrays)
    contenders["jiter_magic (torch CPU tensors)"] = lambda: fn(*tensors)
    if out:
        out_np, out_torch = np.empty(result, arrays[0].dtype), torch.empty(result, dtype=dtype)
        contenders["jiter_magic (NumPy, out=)"] = lambda: fn(*arrays, out=out_np)
        contenders["jiter_magic (torch, out=)"] = lambda: fn(*tensors, out=out_torch)
    if arrays is None:
        omitted["NumPy"] = "no bfloat16"
    elif numpy_why:
        omitted["NumPy"] = numpy_why
    else:
        contenders["NumPy"] = lambda: expr(*arrays)
    contenders["torch eager"] = lambda: expr(*tensors)
    compiled = torch.compile(expr, dynamic=False, fullgraph=True)
    contenders["Inductor"] = lambda: compiled(*tensors)
    if numexpr is None:
        omitted["numexpr"] = "not installed"
    elif numexpr_src is None:
        omitted["numexpr"] = numexpr_why or "no bfloat16"
    else:
        names = dict(zip("axyz" if len(arrays) == 4 else "xy", arrays))
        contenders["numexpr"] = lambda: numexpr.evaluate(numexpr_src, local_dict=names)
        if out:
            contenders["numexpr (out=)"] = lambda: numexpr.evaluate(numexpr_src, local_dict=names, out=out_np)
    if numba is None:
        omitted["numba (parallel)"] = "not installed"
    elif numba_fn is None:
        omitted["numba (parallel)"] = numba_why or "no bfloat16"
    else:
        ufunc = numba.vectorize([numba_sig], target="parallel")(numba_fn)
        contenders["numba (parallel)"] = lambda: ufunc(*arrays)
    wide = [t.double() if t.is_floating_point() else t.long() for t in tensors]
    return Row(name, bytes_moved, contenders, expr(*wide), str(dtype).removeprefix("torch."), tolerance, omitted)


def _floats(count: int, shape, dtype=torch.float32, seed: int = 0) -> list[torch.Tensor]:
    """Uniform in [0, 1): 1 + tanh(x) stays near 1 and above, the math row well conditioned."""
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(shape, generator=g).to(dtype) for _ in range(count)]


def fused_row() -> Row:
    return build("`a*x*y + z`, 2^24 float32", FUSED, fused, _floats(4, N), numexpr_src="a * x * y + z",
                 numba_fn=fused, numba_sig="float32(float32, float32, float32, float32)", out=True)


def math_row(dtype: torch.dtype) -> Row:
    half = dtype == torch.float16
    return build(f"`sin(x)*exp(-y*y) + erf(x*y)/(1+tanh(x))`, 2^24 {str(dtype)[6:]}", MATH, mathy,
                 _floats(2, N, dtype), numpy_why=NO_ERF,
                 numexpr_why=NO_ERF + ("; float16 computed and returned as float32" if half else ""),
                 numba_fn=None if half else mathy_scalar, numba_sig="float32(float32, float32)",
                 numba_why="no float16", tolerance=(1e-2, 1e-2) if half else (1e-4, 1e-5))


def transposed_row() -> Row:
    x, y = _floats(2, (SIDE, SIDE))
    return build("`2*x.t() + y`, x.t() a transposed 4096^2 float32", TWICE_PLUS, twice_plus, [x.t(), y],
                 numexpr_src="2 * x + y", numba_fn=twice_plus, numba_sig="float32(float32, float32)")


def outer_row() -> Row:
    x, y = _floats(2, SIDE)
    return build("outer product `x*y`, (4096,1) x (1,4096) float32", MUL, mul,
                 [x.reshape(SIDE, 1), y.reshape(1, SIDE)], numexpr_src="x * y", numba_fn=mul,
                 numba_sig="float32(float32, float32)")


def int32_row() -> Row:
    g = torch.Generator().manual_seed(1)
    x, y = (torch.randint(-1000, 1000, (N,), generator=g, dtype=torch.int32) for _ in range(2))
    return build("`2*x + y`, 2^24 int32", TWICE_PLUS, twice_plus, [x, y], numexpr_src="2 * x + y",
                 numba_fn=twice_plus, numba_sig="int32(int32, int32)", tolerance=(0, 0))


def bfloat16_row() -> Row:
    return build("`2*x + y`, 2^24 bfloat16", TWICE_PLUS, twice_plus, _floats(2, N, torch.bfloat16),
                 tolerance=(1e-2, 1e-2))


ROWS = (fused_row, lambda: math_row(torch.float32), lambda: math_row(torch.float16), transposed_row, outer_row,
        int32_row, bfloat16_row)


def check(row: Row) -> None:
    """Every contender's result has the row's dtype and shape and matches `expected`: a wrong one is never timed."""
    for name, fn in row.contenders.items():
        got = fn()
        got = got if isinstance(got, torch.Tensor) else torch.from_numpy(np.asarray(got))
        if str(got.dtype).removeprefix("torch.") != row.dtype or got.shape != row.expected.shape:
            raise AssertionError(f"{row.name}: {name} returned {got.dtype} {tuple(got.shape)}, "
                                 f"not {row.dtype} {tuple(row.expected.shape)}")
        rtol, atol = row.tolerance
        torch.testing.assert_close(got.to(row.expected.dtype), row.expected, rtol=rtol, atol=atol,
                                   msg=lambda m, name=name: f"{row.name}: {name}: {m}")
