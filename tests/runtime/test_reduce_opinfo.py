"""Reductions written as functors against torch's own on the sample inputs of PyTorch's OpInfos for
`sum`, `amax`, `argmax`, `logsumexp`, `norm` and `var`, every real dtype each supports, on the CPU
(and on a GPU where there is one). Each torch op is written as a user would write it with
jiter_magic: one reduction, or two passes (a max then a shifted sum for logsumexp, a mean then the
squared deviations for var) and a jitted elementwise step. Complex samples are left out (complex
reductions are not supported yet), and so is the nuclear norm (an SVD, not a reduction).
"""
from __future__ import annotations

import math

import pytest

from jiter_magic import create_jit_fn, create_multi_output_reduction_fn, create_reduction_fn

torch = pytest.importorskip("torch")
opinfo = pytest.importorskip("torch.testing._internal.common_methods_invocations")
# torch.var warns on the samples whose correction leaves no degrees of freedom; ours gives the same inf/nan.
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")

ADD = "template <typename T> T add(T a, T b) { return a + b; }\n"
MAX = "template <typename T> T larger(T a, T b) { return (a != a || a > b) ? a : b; }\n"
MIN = "template <typename T> T smaller(T a, T b) { return (a != a || a < b) ? a : b; }\n"
KEEP_MAX = ("template <typename T> void keep_max(T a, int64_t ia, T b, int64_t ib, T& value, int64_t& index) {\n"
            "  const bool take_b = (b != b && a == a) || b > a || ((b == a || (a != a && b != b)) && ib < ia);\n"
            "  value = take_b ? b : a; index = take_b ? ib : ia;\n}\n")
SUM = create_reduction_fn(ADD, 0, combine="add")
AMAX = create_reduction_fn(MAX, float("-inf"), combine="larger")
ARGMAX = create_multi_output_reduction_fn(KEEP_MAX, combine="keep_max")
# logsumexp: the max of each row, then log(sum(exp(x - max))) + max; an infinite max shifts by 0, as torch's.
SHIFTED_EXP = "template <typename T> T shifted_exp(T x, T m) { return exp(x - (isinf(m) ? T(0) : m)); }\n"
LOG = "template <typename T> T log_of(T total, int64_t n) { return log(total); }\n"
SUM_EXP = create_reduction_fn(SHIFTED_EXP + ADD + LOG, 0, map="shifted_exp", combine="add", finalize="log_of")
PLUS_MAX = create_jit_fn("template <typename T> T plus_max(T s, T m) { return s + (isinf(m) ? T(0) : m); }")
MEAN = create_reduction_fn(ADD + "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n",
                           0, combine="add", finalize="mean")
SQUARED_DEVIATION = "template <typename T> T deviation(T x, T m) { return (x - m) * (x - m); }\n"

REAL = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16, torch.int32,
        torch.int64, torch.uint8, torch.bool]
FLOATING = {torch.float32: torch.float32, torch.float64: torch.float64, torch.float16: torch.float32,
            torch.bfloat16: torch.float32}


def _norm_fn(p: float):
    """The reduction computing torch.norm(x, p): p is written into the code as a user would."""
    if p == 0:
        return create_reduction_fn("template <typename T> T nonzero(T x) { return x != T(0) ? T(1) : T(0); }\n"
                                   + ADD, 0, combine="add")
    if math.isinf(p):
        absolute = "template <typename T> T absolute(T x) { return fabs(x); }\n"
        return create_reduction_fn(absolute + (MAX if p > 0 else MIN), float("-inf") if p > 0 else float("inf"),
                                   map="absolute", combine="larger" if p > 0 else "smaller")
    power = f"template <typename T> T powered(T x) {{ return pow(fabs(x), T({p!r})); }}\n"
    root = f"template <typename T> T root(T total, int64_t n) {{ return pow(total, T(1.0 / {p!r})); }}\n"
    return create_reduction_fn(power + ADD + root, 0, map="powered", combine="add", finalize="root")


def _var_fn(correction: float):
    """The squared deviations from the mean summed over (n - correction), at least 0, as torch.var."""
    divide = (f"template <typename T> T corrected(T total, int64_t n) {{ "
              f"T d = T(n) - T({float(correction)!r}); return total / (d > T(0) ? d : T(0)); }}\n")
    return create_reduction_fn(SQUARED_DEVIATION + ADD + divide, 0, map="deviation", combine="add",
                               finalize="corrected")


_NORMS: dict[float, object] = {}
_VARS: dict[float, object] = {}


def ours_sum(x, dim=None, keepdim=False):
    return SUM(x, dim=dim, keepdim=keepdim)


def ours_amax(x, dim=(), keepdim=False):
    return AMAX(x, dim=dim, keepdim=keepdim, dtype=x.dtype)


def ours_argmax(x, dim=None, keepdim=False):
    indices = ARGMAX(x, dim=dim, keepdim=keepdim).indices
    return indices if dim is not None or not keepdim else indices.reshape([1] * x.ndim)


def ours_logsumexp(x, dim, keepdim=False):
    exact = x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()
    m = AMAX(x, dim=dim, keepdim=True, dtype=FLOATING.get(exact, exact))
    s = SUM_EXP(x, m, dim=dim, keepdim=True, dtype=FLOATING.get(exact, exact))
    result = PLUS_MAX(s, m).to(exact)
    return result if keepdim else result.squeeze(tuple(d % max(x.ndim, 1) for d in dim) if x.ndim else ())


def ours_norm(x, p=2, dim=None, keepdim=False):
    p = 2.0 if p == "fro" else float(p)  # the Frobenius norm is the 2-norm of the elements
    if p not in _NORMS:
        _NORMS[p] = _norm_fn(p)
    return _NORMS[p](x, dim=dim, keepdim=keepdim, dtype=x.dtype)


def ours_var(x, *args, dim=None, unbiased=None, correction=None, keepdim=False):
    if args:  # the 'unbiased' variant: var(x, unbiased)
        (unbiased,) = args
    corrected = 1.0 if correction is None and unbiased is not False else float(correction or 0)
    if corrected not in _VARS:
        _VARS[corrected] = _var_fn(corrected)
    wide = FLOATING[x.dtype]
    mean = MEAN(x, dim=dim, keepdim=True, dtype=wide)
    return _VARS[corrected](x, mean, dim=dim, keepdim=keepdim, dtype=x.dtype)


OURS = {"sum": ours_sum, "amax": ours_amax, "argmax": ours_argmax, "logsumexp": ours_logsumexp,
        "norm": ours_norm, "var": ours_var}


def _cases(device: str):
    for op in opinfo.op_db:
        if op.name not in OURS or op.variant_test_name == "nuc":
            continue
        for dtype in REAL:
            if dtype not in op.supported_dtypes(device):
                continue
            for index, sample in enumerate(op.sample_inputs(device, dtype, requires_grad=False)):
                name = f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}-{dtype}-{index}"
                yield pytest.param(op, sample, id=name.replace("torch.", ""))


def _check(op, sample):
    expected = op(sample.input, *sample.args, **sample.kwargs)
    result = OURS[op.name](sample.input.clone(), *sample.args, **sample.kwargs)
    assert result.dtype == expected.dtype and result.shape == expected.shape, (result, expected)
    assert result.device == expected.device
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(result, expected, equal_nan=True)
    else:
        assert torch.equal(result, expected), (result, expected)


@pytest.mark.parametrize(("op", "sample"), list(_cases("cpu")))
def test_opinfo_samples_on_the_cpu(op, sample):
    _check(op, sample)


def _gpu_cases():
    if not torch.cuda.is_available():
        return [pytest.param(None, None, marks=pytest.mark.gpu, id="needs-a-gpu")]
    return [pytest.param(*case.values, marks=pytest.mark.gpu, id=case.id) for case in _cases("cuda")]


@pytest.mark.gpu
@pytest.mark.parametrize(("op", "sample"), _gpu_cases())
def test_opinfo_samples_on_a_gpu(op, sample):
    _check(op, sample)
