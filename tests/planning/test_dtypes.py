"""dtypes: promotion, result types, safe casting and compute types, checked against torch and NumPy."""
from __future__ import annotations

import fractions
import itertools
import random

import numpy as np
import pytest
import torch

from jiter_magic.errors import DTypeError, JiterError
from jiter_magic.planning import dtypes as D

ALL = D.TORCH_DTYPES + D.UNSIGNED_WIDE
NUMPY_ALL = tuple(n for n in ALL if n != "bfloat16")
PAIRS = list(itertools.product(ALL, ALL))
SCALARS = [True, 3, 2.5, 1 + 2j]
ERR = "DTypeError"


def tdt(name: str) -> torch.dtype:
    return getattr(torch, name)


def tname(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def tensor(name: str, zero_dim: bool, device: str = "cpu") -> torch.Tensor:
    return torch.zeros(() if zero_dim else (2,), dtype=tdt(name), device=device)


def torch_or_error(fn) -> str:
    """torch's answer as a dtype name; an error, or complex32 (which we do not support), as ERR."""
    try:
        result = tname(fn())
    except (RuntimeError, TypeError):
        return ERR
    return ERR if result == "complex32" else result


def ours_or_error(fn) -> str:
    try:
        return fn()
    except DTypeError as exc:
        assert isinstance(exc, TypeError) and isinstance(exc, JiterError)
        return ERR


def test_dtype_table():
    assert set(D.DTYPES) == set(ALL)
    assert len(D.TORCH_DTYPES) == 12 and len(D.UNSIGNED_WIDE) == 3
    for name in NUMPY_ALL:
        d = D.dtype(name)
        assert d.name == name
        assert d.itemsize == np.dtype(name).itemsize
        assert d.kind == np.dtype(name).kind
    for name in ALL:
        assert D.dtype(name).itemsize == torch.empty((), dtype=tdt(name)).element_size()
    assert D.dtype("bfloat16").kind == "f"
    assert D.dtype("float16").ctype == "jm_half"
    assert D.dtype("complex128").ctype == "jm_complex<double>"


@pytest.mark.parametrize("bad", ["complex32", "float8_e4m3fn", "int4", "", "Float32"])
def test_unknown_dtype(bad):
    with pytest.raises(DTypeError) as info:
        D.dtype(bad)
    assert repr(bad) in str(info.value)
    assert "float32" in str(info.value)  # the supported dtypes are listed


# --------------------------------------------------------------------------- promote_types


@pytest.mark.parametrize("a", ALL)
def test_promote_types_matches_torch(a):
    for b in ALL:
        expected = torch_or_error(lambda: torch.promote_types(tdt(a), tdt(b)))
        assert ours_or_error(lambda: D.promote_types(a, b, "torch")) == expected, (a, b)


def test_promote_types_torch_samples():
    assert D.promote_types("uint8", "int8") == "int16"
    assert D.promote_types("float16", "bfloat16") == "float32"
    assert D.promote_types("bfloat16", "complex64") == "complex64"
    assert D.promote_types("float64", "complex64") == "complex128"
    assert D.promote_types("int64", "float16") == "float16"
    assert D.promote_types("bool", "bool") == "bool"
    assert D.promote_types("uint16", "float32") == "float32"
    with pytest.raises(DTypeError, match="uint32"):
        D.promote_types("uint32", "int8")


def test_promote_types_numpy_rules():
    for a, b in itertools.product(NUMPY_ALL, NUMPY_ALL):
        assert D.promote_types(a, b, "numpy") == str(np.promote_types(a, b)), (a, b)
    # NumPy promotes the wide unsigned ints where torch refuses
    assert D.promote_types("uint64", "int64", "numpy") == "float64"
    assert D.promote_types("uint32", "int8", "numpy") == "int64"


# --------------------------------------------------------------------------- torch_result_type

PRIORITY = {False: D.DIMENSIONED, True: D.ZERO_DIM}


@pytest.mark.parametrize("zero_dims", list(itertools.product([False, True], repeat=2)))
def test_torch_result_type_all_pairs(zero_dims):
    za, zb = zero_dims
    mismatches = []
    for a, b in PAIRS:
        expected = torch_or_error(lambda: torch.result_type(tensor(a, za), tensor(b, zb)))
        got = ours_or_error(lambda: D.torch_result_type(((a, PRIORITY[za]), (b, PRIORITY[zb]))))
        if got != expected:
            mismatches.append((a, b, expected, got))
    assert mismatches == []


@pytest.mark.parametrize("scalar", SCALARS, ids=["bool", "int", "float", "complex"])
@pytest.mark.parametrize("zero_dim", [False, True], ids=["dimensioned", "zero_dim"])
def test_torch_result_type_with_python_scalars(scalar, zero_dim):
    mismatches = []
    for a in ALL:
        expected = torch_or_error(lambda: torch.result_type(tensor(a, zero_dim), scalar))
        operands = ((a, PRIORITY[zero_dim]), (D.scalar_dtype(scalar), D.WRAPPED))
        got = ours_or_error(lambda: D.torch_result_type(operands))
        if got != expected:
            mismatches.append((a, expected, got))
    assert mismatches == []


def test_torch_result_type_samples():
    W, Z, N = D.WRAPPED, D.ZERO_DIM, D.DIMENSIONED
    assert D.torch_result_type((("int32", N), ("float64", W))) == "float32"  # a Python float is the default float
    assert D.torch_result_type((("float16", N), ("float64", Z))) == "float16"  # 0-dim does not outrank
    assert D.torch_result_type((("int8", N), ("int64", Z))) == "int8"
    assert D.torch_result_type((("int8", N), ("float64", Z))) == "float64"  # category raise takes the 0-dim dtype
    assert D.torch_result_type((("float64", N), ("complex128", W))) == "complex128"
    assert D.torch_result_type((("bool", N), ("int64", W))) == "int64"
    assert D.torch_result_type((("uint8", N), ("int64", W))) == "uint8"
    # float16 + complex scalar is complex32 in torch, which is unsupported
    with pytest.raises(DTypeError, match="complex32"):
        D.torch_result_type((("float16", N), ("complex128", W)))
    with pytest.raises(DTypeError):
        D.torch_result_type(())


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_torch_result_type_three_tensors_against_addcmul():
    """Three operands of mixed priority; torch's answer from addcmul's TensorIterator on meta tensors."""
    rng = random.Random(1234)
    mismatches = []
    for _ in range(1500):
        picks = [(rng.choice(D.TORCH_DTYPES), rng.random() < 0.4) for _ in range(3)]
        metas = [tensor(name, zero_dim, "meta") for name, zero_dim in picks]
        expected = torch_or_error(lambda: torch.addcmul(*metas).dtype)
        got = ours_or_error(lambda: D.torch_result_type(tuple((n, PRIORITY[z]) for n, z in picks)))
        if got != expected:
            mismatches.append((picks, expected, got))
    assert mismatches == []


# --------------------------------------------------------------------------- numpy_result_type

WEAK = {"bool": True, "int64": 3, "float64": 2.5, "complex128": 1 + 2j}


@pytest.mark.parametrize("scalar_kinds", [(), ("bool",), ("int64",), ("float64",), ("complex128",),
                                          ("int64", "float64"), ("bool", "complex128")])
def test_numpy_result_type_pairs_and_scalars(scalar_kinds):
    mismatches = []
    for a, b in itertools.product(NUMPY_ALL, NUMPY_ALL):
        expected = str(np.result_type(np.dtype(a), np.dtype(b), *(WEAK[k] for k in scalar_kinds)))
        got = D.numpy_result_type((a, b), scalar_kinds)
        if got != expected:
            mismatches.append((a, b, expected, got))
    assert mismatches == []


@pytest.mark.parametrize("a", NUMPY_ALL)
def test_numpy_result_type_single_array_nep50(a):
    for kind, value in WEAK.items():
        assert D.numpy_result_type((a,), (kind,)) == str(np.result_type(np.dtype(a), value)), (a, kind)


def test_numpy_result_type_samples():
    assert D.numpy_result_type(("int8",), ("int64",)) == "int8"  # weak Python int
    assert D.numpy_result_type(("float32",), ("float64",)) == "float32"
    assert D.numpy_result_type(("int8",), ("float64",)) == "float64"
    assert D.numpy_result_type(("float16",), ("complex128",)) == "complex64"
    assert D.numpy_result_type(("uint64", "int64"), ()) == "float64"


# --------------------------------------------------------------------------- can_cast


def test_can_cast_torch_all_pairs():
    mismatches = [(a, b) for a, b in PAIRS if D.can_cast(a, b, "torch") != torch.can_cast(tdt(a), tdt(b))]
    assert mismatches == []


def test_can_cast_numpy_same_kind_all_pairs():
    mismatches = [
        (a, b) for a, b in itertools.product(NUMPY_ALL, NUMPY_ALL)
        if D.can_cast(a, b, "numpy") != bool(np.can_cast(np.dtype(a), np.dtype(b), "same_kind"))
    ]
    assert mismatches == []


def test_can_cast_samples():
    assert D.can_cast("float32", "float16") is True  # same kind, narrower: allowed
    assert D.can_cast("float32", "int32") is False
    assert D.can_cast("complex64", "float64") is False
    assert D.can_cast("int8", "bool") is False
    assert D.can_cast("int8", "uint8", "torch") is True
    assert D.can_cast("int8", "uint8", "numpy") is False
    assert D.can_cast("bool", "complex128") is True


# --------------------------------------------------------------------------- compute dtype, scalars


@pytest.mark.parametrize("name", ALL)
def test_compute_dtype(name):
    expected = "float32" if name in ("float16", "bfloat16") else name
    assert D.compute_dtype(name) == expected


PYTHON_SCALARS = [
    (True, "bool"), (False, "bool"), (0, "int64"), (-(2**40), "int64"), (2.5, "float64"), (float("nan"), "float64"),
    (1 + 2j, "complex128"), (0j, "complex128"), (fractions.Fraction(1, 3), "float64"),
    (np.int64(3), "int64"), (np.int32(3), "int64"), (np.float64(2.5), "float64"), (np.complex128(1j), "complex128"),
]


@pytest.mark.parametrize("value, expected", PYTHON_SCALARS, ids=[repr(v) for v, _ in PYTHON_SCALARS])
def test_scalar_dtype_and_extra_arg_type(value, expected):
    assert D.scalar_dtype(value) == expected
    assert D.extra_arg_type(value) == expected


@pytest.mark.parametrize("value", [np.True_, np.bool_(False)])
def test_scalar_dtype_numpy_bool(value):
    assert D.scalar_dtype(value) == "bool"


BAD_SCALARS = ["3", b"3", None, [1], (1,), {1: 2}, object(), torch.tensor(1.0), np.array([1.0])]


@pytest.mark.parametrize("value", BAD_SCALARS, ids=[type(v).__name__ for v in BAD_SCALARS])
def test_scalar_dtype_rejects_non_scalars(value):
    for fn in (D.scalar_dtype, D.extra_arg_type):
        with pytest.raises(DTypeError) as info:
            fn(value)
        assert type(value).__name__ in str(info.value)
        assert isinstance(info.value, TypeError)
