"""dtypes, type promotion, safe casting and the compute ("opmath") type.

Pure functions over dtype *names* ('float32', 'bfloat16', ...), so the rules can be
tested exhaustively without torch, CuPy or a GPU. Two rule sets: torch's
(`torch.result_type`: dimensioned tensors outrank 0-dim tensors, which outrank Python
scalars) for torch inputs, and NumPy's (NEP 50 weak Python scalars) for NumPy/CuPy inputs.
"""
from __future__ import annotations

import numbers
from functools import cache, lru_cache
from typing import NamedTuple

from jiter_magic.errors import DTypeError


class DType(NamedTuple):
    name: str
    kind: str  # 'b' bool, 'u' unsigned, 'i' signed, 'f' floating, 'c' complex
    itemsize: int
    ctype: str  # storage type in generated C++ (CUDA and host alike)


_ALL = [
    DType("bool", "b", 1, "bool"),
    DType("uint8", "u", 1, "uint8_t"),
    DType("int8", "i", 1, "int8_t"),
    DType("int16", "i", 2, "int16_t"),
    DType("int32", "i", 4, "int32_t"),
    DType("int64", "i", 8, "int64_t"),
    DType("uint16", "u", 2, "uint16_t"),
    DType("uint32", "u", 4, "uint32_t"),
    DType("uint64", "u", 8, "uint64_t"),
    DType("float16", "f", 2, "jm_half"),
    DType("bfloat16", "f", 2, "jm_bfloat16"),
    DType("float32", "f", 4, "float"),
    DType("float64", "f", 8, "double"),
    DType("complex64", "c", 8, "jm_complex<float>"),
    DType("complex128", "c", 16, "jm_complex<double>"),
]
DTYPES: dict[str, DType] = {d.name: d for d in _ALL}

# The twelve dtypes torch's jiterator handles (complex32 aside) and every backend supports.
TORCH_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                "float32", "float64", "complex64", "complex128")
UNSIGNED_WIDE = ("uint16", "uint32", "uint64")

# Priority of an operand in torch's promotion: dimensioned tensors > 0-dim tensors > Python scalars.
DIMENSIONED, ZERO_DIM, WRAPPED = 2, 1, 0


def dtype(name: str) -> DType:
    try:
        return DTYPES[name]
    except KeyError:
        supported = ", ".join(DTYPES)
        raise DTypeError(f"dtype {name!r} is not supported; supported dtypes: {supported}") from None


def ctype(name: str) -> str:
    """The storage type of a dtype in generated C++."""
    return DTYPES[name].ctype


def compute_dtype(name: str) -> str:
    """The type the functor is instantiated with: half and bfloat16 compute in float, as torch's opmath."""
    return "float32" if name in ("float16", "bfloat16") else name


@cache
def promote_types(a: str, b: str, rules: str = "torch") -> str:
    """The promoted dtype of two dtypes (torch.promote_types / numpy.promote_types)."""
    if a == b:
        return a
    da, db = dtype(a), dtype(b)
    if rules == "numpy" and "bfloat16" not in (a, b):
        import numpy

        return str(numpy.promote_types(a, b))
    if rules == "torch" and (a in UNSIGNED_WIDE or b in UNSIGNED_WIDE) and "f" not in (da.kind, db.kind):
        raise DTypeError(f"torch does not promote {a} with {b}; cast one of them first")
    if da.kind == "b":
        return b
    if db.kind == "b":
        return a
    if da.kind in "ui" and db.kind in "ui":
        return _promote_ints(da, db)
    if da.kind == "c" or db.kind == "c":
        return _promote_complex(da, db)
    if da.kind == "f" and db.kind == "f":
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return a if da.itemsize > db.itemsize else b
    return a if da.kind == "f" else b


def _promote_ints(a: DType, b: DType) -> str:
    if a.kind == b.kind:
        return a.name if a.itemsize >= b.itemsize else b.name
    unsigned, signed = (a, b) if a.kind == "u" else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed.name
    return {1: "int16", 2: "int32", 4: "int64"}.get(unsigned.itemsize, "float64")


def _promote_complex(a: DType, b: DType) -> str:
    def component(d: DType) -> int:
        if d.kind == "c":
            return d.itemsize // 2
        if d.kind == "f":
            return max(d.itemsize, 4)
        return 4  # integers do not widen a complex
    return "complex128" if max(component(a), component(b)) == 8 else "complex64"


def _is_float(name: str) -> bool:
    return DTYPES[name].kind == "f"


def _is_complex(name: str) -> bool:
    return DTYPES[name].kind == "c"


def _to_complex(name: str) -> str:
    if name == "float64":
        return "complex128"
    if name in ("float32", "bfloat16"):
        return "complex64"
    raise DTypeError(f"{name} has no complex counterpart among the supported dtypes (complex32 is not supported)")


def _combine_categories(higher: str | None, lower: str | None) -> str | None:
    """torch's rule for letting a lower-priority group raise the category of a higher one."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if _is_complex(higher):
        return higher
    if _is_complex(lower):
        return _to_complex(higher) if _is_float(higher) else lower
    if _is_float(higher):
        return higher
    if higher == "bool" or _is_float(lower):
        return promote_types(higher, lower, "torch")
    return higher


def scalar_dtype(value: object) -> str:
    """dtype name a Python scalar carries before promotion (int -> int64, float -> float64)."""
    if isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int64"
    if isinstance(value, numbers.Real):
        return "float64"
    if isinstance(value, numbers.Complex):
        return "complex128"
    raise DTypeError(f"expected a bool, int, float or complex scalar, got {type(value).__name__}: {value!r}")


@lru_cache(maxsize=4096)
def torch_result_type(operands: tuple[tuple[str, int], ...], default_float: str = "float32") -> str:
    """torch.result_type over (dtype, priority) pairs; a Python float counts as torch's default
    dtype (`torch.get_default_dtype()`, float32 unless changed), a complex as its complex type."""
    wrapped = {"float64": default_float, "complex128": "complex128" if default_float == "float64" else "complex64"}
    groups: dict[int, str | None] = {DIMENSIONED: None, ZERO_DIM: None, WRAPPED: None}
    for name, priority in operands:
        if priority == WRAPPED:
            name = wrapped.get(name, name)
        current = groups[priority]
        groups[priority] = name if current is None else promote_types(current, name, "torch")
    result = _combine_categories(groups[DIMENSIONED], _combine_categories(groups[ZERO_DIM], groups[WRAPPED]))
    if result is None:
        raise DTypeError("cannot infer a dtype: no array inputs")
    return result


@lru_cache(maxsize=4096)
def numpy_result_type(array_dtypes: tuple[str, ...], scalar_kinds: tuple[str, ...]) -> str:
    """NumPy 2 (NEP 50) result type: arrays decide, Python scalars are weak and only raise the kind."""
    import numpy

    weak = {"bool": False, "int64": 0, "float64": 0.0, "complex128": 0j}
    return str(numpy.result_type(*array_dtypes, *(weak[kind] for kind in scalar_kinds)))


def can_cast(source: str, target: str, rules: str = "torch") -> bool:
    """Whether a result of dtype `source` may be written into `target` (torch canCast / NumPy same_kind)."""
    s, t = DTYPES[source], DTYPES[target]
    if s.kind == "c" and t.kind != "c":
        return False
    if s.kind == "f" and t.kind in "bui":
        return False
    if s.kind != "b" and t.kind == "b":
        return False
    if rules == "numpy" and s.kind == "i" and t.kind == "u":
        return False
    return True


def extra_arg_type(value: object) -> str:
    """C++ type class of an extra scalar argument, as torch's jiterator converts it."""
    return scalar_dtype(value)


def dtype_name(value: object) -> str:
    """A `dtype=` (a torch or NumPy dtype, a type such as float, or a name) as a dtype name."""
    if isinstance(value, str):
        return dtype(value).name
    if type(value).__module__.startswith("torch"):
        return dtype(str(value).removeprefix("torch.")).name
    try:
        import numpy

        return dtype(numpy.dtype(value).name).name  # type: ignore[call-overload]
    except TypeError:
        raise DTypeError(f"dtype= must be a torch or NumPy dtype or a dtype name, got {value!r}") from None
