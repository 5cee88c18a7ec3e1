"""Scans written as functors against torch's own on the sample inputs of PyTorch's OpInfos for
`cumsum`, `cumprod`, `cummax`, `cummin` and `logcumsumexp`, every real dtype each supports, on the
CPU (and on a GPU where there is one). Complex samples are left out (complex scans are not
supported yet)."""
from __future__ import annotations

import pytest
from scan_functions import cummax, cummin, cumprod, cumsum, logcumsumexp

torch = pytest.importorskip("torch")
opinfo = pytest.importorskip("torch.testing._internal.common_methods_invocations")

REAL = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16, torch.int32,
        torch.int64, torch.uint8, torch.bool]


def ours_logcumsumexp(x, dim):
    exact = x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()
    return logcumsumexp(x, dim=dim, dtype=exact)


OURS = {"cumsum": lambda x, dim, dtype=None: cumsum(x, dim=dim, dtype=dtype),
        "cumprod": lambda x, dim, dtype=None: cumprod(x, dim=dim, dtype=dtype),
        "cummax": lambda x, dim: cummax(x, dim=dim), "cummin": lambda x, dim: cummin(x, dim=dim),
        "logcumsumexp": ours_logcumsumexp}


def _cases(device: str):
    for op in opinfo.op_db:
        if op.name not in OURS:
            continue
        for dtype in REAL:
            if dtype not in op.supported_dtypes(device):
                continue
            for index, sample in enumerate(op.sample_inputs(device, dtype, requires_grad=False)):
                name = f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}-{dtype}-{index}"
                yield pytest.param(op, sample, id=name.replace("torch.", ""))


def _same(result, expected):
    assert result.dtype == expected.dtype and result.shape == expected.shape, (result, expected)
    assert result.device == expected.device
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(result, expected, equal_nan=True)
    else:
        assert torch.equal(result, expected), (result, expected)


def _check(op, sample):
    expected = op(sample.input, *sample.args, **sample.kwargs)
    result = OURS[op.name](sample.input.clone(), *sample.args, **sample.kwargs)
    if isinstance(expected, tuple):  # values and indices
        _same(result.values, expected[0])
        _same(result.indices, expected[1])
    else:
        _same(result, expected)


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
