"""A catalogue of bad and hostile inputs, each with its exact outcome.

Every case is one row of a table: an id, a callable producing the outcome, and what must come
out: either `Raises(the jiter_magic class, the standard base it documents, a regex the message
must match)` — raised twice in a row, so nothing half-made is remembered — or `SAME`, for an
input that is valid but odd: the callable then returns (what jiter_magic gave, what torch eager
or NumPy gives), compared in value, dtype and shape. After every case a good call must still
work (`good_call_works`). Cache states and concurrency have their own tables and tests below.

Cases marked `xfail(strict=True, reason="package bug: ...")` assert the right behaviour where the
package is wrong today; they turn into failures (XPASS) once the package is fixed.
"""
from __future__ import annotations

import array
import ctypes
import decimal
import enum
import fractions
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch

import jiter_magic
import jiter_magic.cache.disk as cache_module
from jiter_magic import (
    ArgumentTypeError,
    BindError,
    CacheWarning,
    CompileError,
    DeviceError,
    DTypeError,
    GradientError,
    IntegerDivisionError,
    InvalidArgumentError,
    JiterError,
    KernelFaultError,
    ParseError,
    ScalarOverflowError,
    SettingWarning,
    ShapeError,
    UnknownKwargError,
    UnsupportedArrayError,
)
from jiter_magic import create_jit_fn as jit
from jiter_magic import create_multi_output_jit_fn as jit_multi

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TAG = uuid.uuid4().hex[:8]  # names that no earlier process or test module compiled
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def bug(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"package bug: {reason}")


# ----------------------------------------------------------------------------- shared functions (compiled once)
ADD = jit("template <typename T> T bad_add(T x, T y) { return x + y; }")
SCALE = jit("template <typename T> T bad_scale(T x, T alpha) { return x * alpha; }", alpha=2.0)
INC = jit("template <typename T> T bad_inc(T x) { return x + T(1); }")
TWO = jit_multi("template <typename T> void bad_two(T x, T& sum, T& diff) { sum = x + T(1); diff = x - T(1); }", 2)
DIV = jit("template <typename T> T bad_div(T x, T y) { return x / y; }")
REM = jit("template <typename T> T bad_rem(T x, T y) { return x % y; }")
NULL_READ = jit("template <typename T> T bad_null_read(T x) { volatile T* p = nullptr; return *p + x; }")
NULL_WRITE = jit("template <typename T> T bad_null_write(T x) { volatile T* p = nullptr; *p = x; return x; }")
FAR_WRITE = jit("#include <cstdint>\n"
                "template <typename T> T bad_far_write(T x) {\n"
                "  volatile T* p = reinterpret_cast<volatile T*>(uintptr_t(0xdead0000000ull));  // nothing is mapped there\n"
                "  *p = x; return x;\n}")
TRAP = jit("template <typename T> T bad_trap(T x) { if (x > T(1)) __builtin_trap(); return x; }")
THROW_STD = jit('#include <stdexcept>\n'
                'template <typename T> T bad_throw(T x) { if (x > T(1)) throw std::runtime_error("x is too big"); '
                'return x; }')
THROW_INT = jit("template <typename T> T bad_throw_int(T x) { if (x > T(1)) throw 42; return x; }")
THROW_LITERAL = jit('template <typename T> T bad_throw_literal(T x) { if (x > T(1)) throw "a literal"; return x; }')
BAD_ALLOC = jit("#include <cstddef>\n"
                "template <typename T> T bad_alloc(T x) {\n"
                "  volatile size_t n = size_t(1) << 62; T* p = new T[n]; p[0] = x; T r = p[0]; delete[] p; return r;\n}")


def good_call_works() -> None:
    """A following good call works: torch and NumPy inputs (the hot path on the second call) and out=."""
    x = torch.arange(4.0)
    for _ in range(2):
        torch.testing.assert_close(ADD(x, x), 2 * x)
    n = np.arange(3, dtype=np.int32)
    got = ADD(n, n)
    assert got.dtype == np.int32 and got.tolist() == [0, 2, 4]
    out = np.empty(3)
    assert SCALE(np.arange(3.0), out=out) is out
    assert out.tolist() == [0.0, 2.0, 4.0]


# ----------------------------------------------------------------------------- the expectation kinds
class Raises(NamedTuple):
    error: type[JiterError] | tuple[type[JiterError], ...]  # the exact class (or any one of these)
    standard: type[BaseException] | tuple[type[BaseException], ...]  # the standard type it documents
    pattern: str  # re.search on str(exception): says what was wrong (and what was expected)


SAME = "same as torch eager / NumPy"  # the callable returns (got, want)


def assert_same(got: Any, want: Any) -> None:
    """Equal values, dtype, shape and library; tuples element by element."""
    if isinstance(want, tuple):
        assert type(got) is tuple and len(got) == len(want), got
        for g, w in zip(got, want):
            assert_same(g, w)
    elif isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), type(got)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
        torch.testing.assert_close(got.detach(), want.detach(), equal_nan=True)
    elif isinstance(want, np.ndarray):
        assert type(got) is np.ndarray, type(got)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        if got.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=1e-3 if got.dtype.itemsize <= 2 else 1e-6, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, want)
    else:
        assert got == want, (got, want)


def expect_raises(make: Callable[[], Any], expect: Raises) -> BaseException:
    errors = expect.error if isinstance(expect.error, tuple) else (expect.error,)
    with pytest.raises(errors, match=expect.pattern) as info:
        make()
    exc = info.value
    assert type(exc) in errors, type(exc)  # exactly the documented class, not just a base
    assert isinstance(exc, JiterError) and isinstance(exc, expect.standard), type(exc).__mro__
    if isinstance(exc, IntegerDivisionError):
        assert isinstance(exc, RuntimeError)  # both, as documented (torch eager raises RuntimeError there)
    return exc


def check(make: Callable[[], Any], expect: Raises | str) -> None:
    if isinstance(expect, Raises):
        for _ in range(2):  # the same error again: no half-made plan, kernel or cache entry was kept
            expect_raises(make, expect)
    else:
        assert expect is SAME
        got, want = make()
        assert_same(got, want)
    good_call_works()


def case(case_id: str, make: Callable[[], Any], expect: Raises | str, *marks: pytest.MarkDecorator) -> Any:
    return pytest.param(make, expect, id=case_id, marks=marks)


def quiet(make: Callable[[], Any]) -> Any:
    """Build an input whose constructor warns (quantized, nested, complex32 tensors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make()


def numpy_quietly(make: Callable[[], Any]) -> Any:
    """NumPy's reference value of an overflow or a division by zero, without its RuntimeWarning."""
    with np.errstate(all="ignore"):
        return make()


def new_fn_call(code: str, *args: Any, **kwargs: Any) -> Callable[[], Any]:
    """Create a function from `code` and call it: an error may come at either step."""
    return lambda: jit(code, **kwargs)(*args)


def new_fn_same(code: str, args: tuple, want: Callable[[], Any], **kwargs: Any) -> Callable[[], Any]:
    return lambda: (jit(code, **kwargs)(*args), want())


def parse_error(pattern: str) -> Raises:
    return Raises(ParseError, ValueError, pattern)


def compile_error(pattern: str) -> Raises:
    return Raises(CompileError, RuntimeError, pattern)


def bind_error(pattern: str) -> Raises:
    return Raises(BindError, TypeError, pattern)


def dtype_error(pattern: str) -> Raises:
    return Raises(DTypeError, TypeError, pattern)


NO_DEFINITION = r"the code string holds no C\+\+ function definition: expected a function definition such as"
X3 = np.arange(3.0)
ONES2 = np.ones(2)
OUT2 = "template <typename T> void two_refs(T x, T& o, T& p) { o = x + T(1); p = x - T(1); }"
NINE = ("template <typename T> void nine(T x, T& o0, T& o1, T& o2, T& o3, T& o4, T& o5, T& o6, T& o7, T& o8) {\n"
        "  o0 = x; o1 = x + T(1); o2 = x + T(2); o3 = x + T(3); o4 = x + T(4); o5 = x + T(5); o6 = x + T(6);\n"
        "  o7 = x + T(7); o8 = x + T(8);\n}")


# ============================================================================= code strings and creation kwargs
CODE_CASES = [
    # --- no function definition at all: ParseError naming what the string holds instead
    case("empty", lambda: jit(""), parse_error(NO_DEFINITION + r".*It is empty\. The code string: ''")),
    case("whitespace-only", lambda: jit(" \n\t \n"), parse_error(r"no C\+\+ function definition.*It is empty")),
    case("only-comments", lambda: jit("// one\n/* two */\n"),
         parse_error(r"no C\+\+ function definition.*It holds only comments and preprocessor lines")),
    case("only-preprocessor", lambda: jit("#include <cmath>\n#define SCALE 2\n"),
         parse_error(r"It holds only comments and preprocessor lines\. The code string: '#include <cmath>")),
    case("only-a-struct", lambda: jit("struct Pair { float a, b; };"),
         parse_error(r"Found instead a struct `Pair` \(line 1\), whose functions cannot be the entry point")),
    case("only-a-namespace", lambda: jit("namespace helpers { inline int one() { return 1; } }"),
         parse_error(r"Found instead a namespace `helpers` \(line 1\), whose functions cannot be the entry point")),
    case("declaration-without-body", lambda: jit("template <typename T> T decl_only(T x);"),
         parse_error(r"Found instead a declaration without a `\{ \.\.\. \}` body, "
                     r"`template <typename T> T decl_only\(T x\);` \(line 1\)")),
    case("lambda", lambda: jit("auto twice = [](float x) { return 2 * x; };"),
         parse_error(r"Found instead a lambda `auto twice = \[\]\(float x\) \{ \.\.\. \}` \(line 1\); "
                     r"the entry point must be a named function")),
    # --- malformed text: ParseError with the line
    case("unclosed-brace", lambda: jit("template <typename T>\nT open_brace(T x) {\n  return x;\n"),
         parse_error(r"^'\{' on line 2 of the code string is never closed$")),
    case("extra-closing-brace", lambda: jit("template <typename T> T extra(T x) { return x; }\n}"),
         parse_error(r"^unbalanced '\}' on line 2 of the code string$")),
    case("unclosed-paren", lambda: jit("template <typename T> T open_paren(T x { return x; }"),
         parse_error(r"^'\(' on line 1 of the code string is never closed$")),
    case("extra-closing-paren", lambda: jit("template <typename T> T extra_paren(T x)) { return x; }"),
         parse_error(r"^unbalanced '\)' on line 1 of the code string$")),
    case("unclosed-template-angle", lambda: jit("template <typename T T open_angle(T x) { return x; }"),
         parse_error(r"'template <' on line 1 of the code string is never closed\n  line 1: template <typename T T")),
    case("two-word-name", lambda: jit("template <typename T> T my _kernel(T x) { return x; }"),
         parse_error(r"malformed function definition on line 1 of the code string: .*`T` and `my` are two types "
                     r"where a return type names one; is `my _kernel` meant to be one name\?")),
    case("missing-return-type", lambda: jit("template <typename T> no_type(T x) { return x; }"),
         parse_error(r"malformed function definition on line 1.*nothing names a return type before `no_type`")),
    case("parameter-without-name", lambda: jit("template <typename T> T unnamed(T) { return T(1); }"),
         parse_error(r"^parameter 'T' of 'unnamed' \(line 1\) needs a type and a name, for example 'T x'$")),
    case("duplicate-parameter", lambda: jit("template <typename T> T dup(T x, T x) { return x; }"),
         parse_error(r"^'dup' declares parameter 'x' twice$")),
    case("variadic-parameter", lambda: jit("template <typename T> T variadic(T x, ...) { return x; }"),
         parse_error(r"^parameter '\.\.\.' of 'variadic' \(line 1\) needs a type and a name")),
    case("line-continued-comment-hides-the-function", new_fn_call("// a note \\\ntemplate <typename T> T hidden(T x) { return x; }", X3),
         parse_error(NO_DEFINITION)),
    # --- not a str
    case("code-int", lambda: jit(42), Raises(ArgumentTypeError, TypeError, r"^code_string must be a str of C\+\+ source, got int$")),
    case("code-bytes", lambda: jit(b"template <typename T> T f(T x) { return x; }"),
         Raises(ArgumentTypeError, TypeError, r"code_string must be a str of C\+\+ source, got bytes")),
    case("code-None", lambda: jit(None), Raises(ArgumentTypeError, TypeError, r"got NoneType")),
    case("code-list-of-lines", lambda: jit(["template <typename T>", "T f(T x) { return x; }"]),
         Raises(ArgumentTypeError, TypeError, r"got list")),
    # --- text the compiler rejects: CompileError at the first call, at the user's own line
    case("unterminated-comment", new_fn_call("template <typename T> T open_comment(T x) { return x; } /* never closed", X3),
         compile_error(r"line 1, column \d+: error: unterminated comment")),
    case("unterminated-string", new_fn_call('template <typename T> T open_string(T x) { const char* s = "abc; return x; }', X3),
         compile_error(r"line 1, column \d+: error: missing terminating . character")),
    case("hash-error-line", new_fn_call("#error this kernel is not ready\ntemplate <typename T> T not_ready(T x) { return x; }", X3),
         compile_error(r"line 1, column \d+: error: #error this kernel is not ready")),
    case("include-missing-header", new_fn_call("#include <no_such_header_jm.h>\ntemplate <typename T> T inc_missing(T x) { return x; }", X3),
         compile_error(r"line 1, column \d+: fatal error: no_such_header_jm\.h: No such file or directory")),
    case("compile-error-in-helper", new_fn_call("template <typename T> T helper(T a) {\n  return a +* ;\n}\n"
                                                "template <typename T> T uses_helper(T x) { return helper(x); }", X3),
         compile_error(r"line 2, column \d+: error: expected primary-expression before .;. token")),
    case("infinite-template-recursion", new_fn_call("template <int N> struct Forever { static const int v = Forever<N + 1>::v; };\n"
                                                    "template <typename T> T recurse(T x) { return x + Forever<0>::v; }", X3),
         compile_error(r"template instantiation depth exceeds maximum of \d+")),
    # The code string's macros act on its own code only: the generated kernel is compiled with them undefined.
    case("define-float-double", new_fn_same("#define float double\ntemplate <typename T> T widened(T x) { return x; }",
                                            (np.ones(3, np.float32),), lambda: np.ones(3, np.float32)), SAME),
    case("define-int64_t-int", new_fn_same("#define int64_t int\ntemplate <typename T> T narrowed(T x) { return x; }",
                                           (X3,), lambda: X3), SAME),
    case("define-sizeof", new_fn_same("#define sizeof(x) 4\ntemplate <typename T> T fake_sizeof(T x) { return x; }",
                                      (X3,), lambda: X3), SAME),
    case("define-static_assert-away-and-float-double",
         new_fn_same("#define static_assert(...)\n#define float double\n"
                     "template <typename T> T no_check(T x) { return x + T(1); }", (np.ones(2, np.float32),),
                     lambda: np.full(2, 2, np.float32)), SAME),
    case("keyword-as-name", new_fn_call("template <typename T> T int(T x) { return x; }", X3),
         compile_error(r"line 1, column \d+: error: expected .\). before .x.")),
    case("entry-named-main", new_fn_call("template <typename T> T main(T x) { return x; }", X3),
         compile_error(r"line 1, column \d+: error: cannot declare .::main. to be a template")),
    case("pointer-parameter", new_fn_call("template <typename T> T deref(T* x) { return *x; }", X3),
         compile_error(r"cannot convert .*to .double\*.")),
    case("complex-default-for-an-int-parameter",
         new_fn_call("template <typename T> T int_alpha(T x, T alpha) { return x * alpha; }", np.arange(3), alpha=1j),
         compile_error(r"cannot convert .jm_complex<double>. .*to .long int.")),
    # --- odd text that is valid: the right values
    case("nul-byte-in-body", new_fn_same("template <typename T> T nul_byte(T x) {\0 return x + T(1); }", (X3,),
                                         lambda: X3 + 1), SAME),
    case("non-ascii-comments-and-identifier",
         new_fn_same("// café, 中文, \u00ff\ntemplate <typename T> T größe(T x) { return x * T(2); }", (X3,),
                     lambda: X3 * 2), SAME),
    case("lone-surrogate", new_fn_call("template <typename T> T surrogate(T x) { return x; } // \udcff", X3),
         parse_error(r"UTF-8|surrogate|encod")),
    case("huge-code-string-10MB", new_fn_same("// " + "x" * 10_000_000 + "\ntemplate <typename T> T huge(T x) { return x - T(1); }",
                                              (X3,), lambda: X3 - 1), SAME),
    case("braces-in-strings-and-chars",
         new_fn_same('template <typename T> T braces(T x) { const char* s = "}{)("; char c = \'}\'; (void)s; (void)c; '
                     'return x + T(2); }', (X3,), lambda: X3 + 2), SAME),
    case("raw-string-with-braces",
         new_fn_same('template <typename T> T raw(T x) { const char* s = R"jm( } { )jm"; (void)s; return x + T(3); }',
                     (X3,), lambda: X3 + 3), SAME),
    case("names-like-generated-ones",
         new_fn_same("template <typename T> T names(T n, T in0, T out0, T i) { return n + in0 * out0 - i; }",
                     (X3, X3, ONES2[:1], 1.0), lambda: X3 + X3 - 1.0), SAME),
    case("entry-named-jm_kernel", new_fn_same("template <typename T> T jm_kernel(T x) { return x * T(4); }", (X3,),
                                              lambda: X3 * 4), SAME),
    case("entry-named-sin", new_fn_same("template <typename T> T sin(T x) { return x + T(5); }", (X3,),
                                        lambda: X3 + 5), SAME),
    case("overloads-last-is-entry",
         new_fn_same("template <typename T> T ov(T x) { return x; }\ntemplate <typename T> T ov(T x, T y) { return x - y; }",
                     (X3, ONES2[:1]), lambda: X3 - 1), SAME),
    case("non-template-float-entry-on-int64",
         new_fn_same("float plain(float x) { return x * 2.5f; }", (torch.arange(3),),
                     lambda: (torch.arange(3).float() * 2.5).to(torch.int64)), SAME),
    case("bool-return-type", new_fn_same("template <typename T> bool greater(T x, T y) { return x > y; }",
                                         (torch.arange(3.0), torch.ones(3)),
                                         lambda: (torch.arange(3.0) > torch.ones(3)).float()), SAME),
    case("auto-return-int-promotion",
         new_fn_same("template <typename T> auto doubled(T x) { return x * 2; }", (torch.tensor([100, -100, 3], dtype=torch.int8),),
                     lambda: torch.tensor([100, -100, 3], dtype=torch.int8) * 2), SAME),
    case("default-argument-is-still-an-input", new_fn_call("template <typename T> T defaulted(T x, T y = 1) { return x + y; }", X3),
         bind_error(r"^defaulted takes 2 input\(s\) \['x', 'y'\], got 1$")),
    # --- reference parameters and num_outputs
    case("refs-in-create_jit_fn", lambda: jit(OUT2),
         bind_error(r"the entry function must return a value \(it is declared 'void'\): template <typename T> void two_refs")),
    case("returns-and-ref-output", lambda: jit("template <typename T> T both(T x, T& o) { o = x; return x; }"),
         bind_error(r"both returns a value and also takes reference outputs \['o'\]; use create_multi_output_jit_fn")),
    case("rvalue-reference-parameter", lambda: jit("template <typename T> T rref(T&& x) { return x; }"),
         bind_error(r"rref returns a value and also takes reference outputs \['x'\]")),
    case("void-without-outputs", lambda: jit("template <typename T> void nothing(T x) { }"),
         bind_error(r"must return a value \(it is declared 'void'\)")),
    case("num_outputs-0", lambda: jit_multi(OUT2, 0), bind_error(r"^num_outputs must be a positive int, got 0$")),
    case("num_outputs-negative", lambda: jit_multi(OUT2, -1), bind_error(r"^num_outputs must be a positive int, got -1$")),
    case("num_outputs-float", lambda: jit_multi(OUT2, 1.5), bind_error(r"^num_outputs must be a positive int, got 1\.5$")),
    case("num_outputs-bool", lambda: jit_multi(OUT2, True), bind_error(r"^num_outputs must be a positive int, got True$")),
    case("num_outputs-str", lambda: jit_multi(OUT2, "2"), bind_error(r"^num_outputs must be a positive int, got '2'$")),
    case("num_outputs-None", lambda: jit_multi(OUT2, None), bind_error(r"num_outputs must be a positive int, got None")),
    case("num_outputs-mismatch", lambda: jit_multi(OUT2, 3),
         bind_error(r"num_outputs=3, but two_refs declares 2 reference output parameter\(s\) \['o', 'p'\]; "
                    r"outputs are written through non-const references")),
    case("num_outputs-9-no-limit-of-8", lambda: (jit_multi(NINE, 9)(X3), tuple(X3 + k for k in range(9))), SAME),
    # --- creation kwargs
    case("kwarg-names-no-parameter", lambda: jit("template <typename T> T kw(T x, T alpha) { return x; }", alpha=1.0, beta=2.0),
         bind_error(r"keyword argument 'beta' names no parameter of the entry function; its parameters are \['x', 'alpha'\]")),
    case("kwarg-named-out", lambda: jit("template <typename T> T kw_out(T x, T out) { return x; }", out=1.0),
         bind_error(r"^'out' is reserved for the output arrays of a call; rename that parameter of kw_out$")),
    case("kwarg-names-an-output", lambda: jit_multi("template <typename T> void kw_ref(T x, T& o) { o = x; }", 1, o=1.0),
         bind_error(r"keyword argument 'o' names an output \(a reference parameter\)")),
    case("kwargs-bind-every-parameter", lambda: jit("template <typename T> T all_kw(T x) { return x; }", x=1.0),
         bind_error(r"template <typename T> T all_kw\(T x\) has no input parameter left once the keyword arguments are bound")),
    case("no-parameters", lambda: jit("template <typename T> T no_params() { return T(1); }"),
         bind_error(r"has no input parameter left")),
    case("kwarg-list", lambda: jit("template <typename T> T kw(T x, T a) { return x; }", a=[1.0, 2.0]),
         dtype_error(r"^argument 'a' must be a bool, int, float or complex \(or a 1-element array\), got list$")),
    case("kwarg-str", lambda: jit("template <typename T> T kw(T x, T a) { return x; }", a="1.0"),
         dtype_error(r"argument 'a' must be a bool, int, float or complex .*got str")),
    case("kwarg-None", lambda: jit("template <typename T> T kw(T x, T a) { return x; }", a=None),
         dtype_error(r"argument 'a' must be .*got NoneType")),
    case("kwarg-2-element-array", lambda: jit("template <typename T> T kw(T x, T a) { return x; }", a=np.ones(2)),
         dtype_error(r"argument 'a' must be .*\(or a 1-element array\), got ndarray")),
    case("kwarg-Decimal", lambda: jit("template <typename T> T kw(T x, T a) { return x; }", a=decimal.Decimal("1.5")),
         dtype_error(r"expected a bool, int, float or complex scalar, got Decimal: Decimal\('1\.5'\)")),
    case("kwarg-2**70", lambda: jit("template <typename T> T kw(T x, T a) { return x; }", a=2**70),
         Raises(ScalarOverflowError, OverflowError, r"^argument 'a' = 1180591620717411303424 does not fit the int64_t it is passed as$")),
    case("kwarg-nan", new_fn_same("template <typename T> T kw_mul(T x, T a) { return x * a; }", (torch.arange(3.0),),
                                  lambda: torch.arange(3.0) * float("nan"), a=float("nan")), SAME),
    case("kwarg-inf", new_fn_same("template <typename T> T kw_mul(T x, T a) { return x * a; }", (torch.arange(3.0),),
                                  lambda: torch.arange(3.0) * float("inf"), a=float("inf")), SAME),
    case("kwarg-1x1-array-is-item-ed", new_fn_same("template <typename T> T kw_mul(T x, T a) { return x * a; }", (X3,),
                                                   lambda: X3 * 3.0, a=np.full((1, 1), 3.0)), SAME),
]


@pytest.mark.slow
@pytest.mark.parametrize("make,expect", CODE_CASES)
def test_code_strings_and_creation_kwargs(make, expect):
    check(make, expect)


# ============================================================================= call arguments
class MyT(torch.Tensor):
    """A plain subclass: its storage holds its values."""


class MyDispatch(torch.Tensor):
    """A subclass with its own __torch_dispatch__: its data_ptr() need not cover its values."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class Color(enum.IntEnum):
    RED = 3


class ArrayLike:
    """Only __array__: NumPy reads it."""

    def __array__(self, dtype=None, copy=None):
        return np.arange(3.0)


def odd_strides_float64() -> np.ndarray:
    return np.ndarray((3,), np.float64, np.zeros(40, np.uint8).data, 0, (12,))


def unaligned_float64() -> np.ndarray:
    buffer = np.zeros(3 * 8 + 1, np.uint8)
    view = buffer[1:].view(np.float64)
    view[:] = [1.0, 2.0, 3.0]
    return view


def read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def backward_through_a_result() -> None:
    x = torch.arange(3.0, requires_grad=True)
    result = SCALE(x)
    assert result.requires_grad and result.grad_fn is not None
    torch.testing.assert_close(result.detach(), 2 * x.detach())  # the value is right...
    result.sum().backward()  # ...and its backward raises: no silent missing gradient


def backward_through_a_kwarg_that_requires_grad() -> None:
    alpha = torch.tensor(3.0, requires_grad=True)
    result = SCALE(torch.ones(2), alpha=alpha)  # refusing here (GradientError) would be right too
    result.sum().backward()  # must raise GradientError: d result / d alpha exists and would be silently missing


def inc_without_grad(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return INC(x)


def storage_shrunk_below_the_view() -> torch.Tensor:
    x = torch.ones(1000)
    x.untyped_storage().resize_(8)  # the view still says 1000 floats
    return x


def storage_resized_to_nothing() -> torch.Tensor:
    x = torch.ones(3)
    x.untyped_storage().resize_(0)  # data_ptr() is now 0 (torch eager itself segfaults on x + 1)
    return x


def with_backend(backend: str) -> Callable[[], Any]:
    def make():
        fn = jit("template <typename T> T backend_fn(T x) { return x; }")
        fn.backend = backend
        return fn(X3)
    return make


def t8(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int8)


I8 = np.array([1, 2, 3], np.int8)
TF = torch.arange(3.0)
LONGDOUBLE = np.dtype(np.longdouble)
NO_EXTENDED = pytest.mark.skipif(LONGDOUBLE.itemsize == 8, reason="longdouble is float64 here")
NOT_AN_ARRAY = r"^expected a torch tensor, a CuPy or NumPy array \(or an object with __cuda_array_interface__, __dlpack__ or the buffer protocol\) or a Python number, got "
NUMPY_DTYPE = r"numpy dtype {} is not supported by jiter_magic \(supported: \['bool', 'complex128'.*\], native byte order\)"

CALL_CASES = [
    # --- wrong count, no array
    case("too-few-inputs", lambda: ADD(TF), bind_error(r"^bad_add takes 2 input\(s\) \['x', 'y'\], got 1$")),
    case("too-many-inputs", lambda: ADD(TF, TF, TF), bind_error(r"^bad_add takes 2 input\(s\) \['x', 'y'\], got 3$")),
    case("no-inputs", lambda: ADD(), bind_error(r"^bad_add takes 2 input\(s\) \['x', 'y'\], got 0$")),
    case("extra-given-positionally", lambda: SCALE(TF, 3.0), bind_error(r"^bad_scale takes 1 input\(s\) \['x'\], got 2$")),
    case("only-python-scalars", lambda: ADD(1, 2.0), bind_error(r"^bad_add needs at least one array input; got only Python scalars$")),
    case("only-numpy-scalars", lambda: ADD(np.float32(1), np.float32(2)), bind_error(r"needs at least one array input")),
    # --- libraries and devices
    case("torch-and-numpy", lambda: ADD(TF, X3),
         Raises(DeviceError, RuntimeError, r"^inputs mix torch and numpy arrays; convert them to one library$")),
    case("numpy-and-torch", lambda: ADD(X3, TF), Raises(DeviceError, RuntimeError, r"inputs mix numpy and torch arrays")),
    case("cpu-and-meta-tensor", lambda: ADD(TF, torch.ones(3, device="meta")),
         Raises(DeviceError, RuntimeError, r"^tensors on 'meta' are not supported; jiter_magic runs on CPU and CUDA tensors$")),
    case("meta-only", lambda: INC(torch.ones(3, device="meta")), Raises(DeviceError, RuntimeError, r"'meta'")),
    case("backend-cuda-with-cpu-inputs", with_backend("cuda"),
         Raises(DeviceError, RuntimeError, r"backend_fn is set to backend='cuda' but its inputs live on the CPU; "
                                           r"move them, or set backend='auto'")),
    case("backend-tpu", with_backend("tpu"),
         Raises(InvalidArgumentError, ValueError, r"^backend must be 'auto', 'cuda' or 'cpu', got 'tpu'$")),
    case("compile-float128", lambda: INC.compile("float128", backend="cpu"),
         dtype_error(r"^dtype 'float128' is not supported; supported dtypes: bool, uint8")),
    # --- unsupported dtypes
    case("torch-complex32", lambda: ADD(*quiet(lambda: [torch.ones(3, dtype=torch.complex32)] * 2)),
         dtype_error(r"^torch dtype torch\.complex32 is not supported by jiter_magic$")),
    case("torch-float8", lambda: INC(torch.ones(3, dtype=torch.float8_e4m3fn)),
         dtype_error(r"torch dtype torch\.float8_e4m3fn is not supported")),
    case("torch-uint64-with-int64", lambda: ADD(torch.ones(2, dtype=torch.uint64), torch.ones(2, dtype=torch.int64)),
         dtype_error(r"^torch does not promote uint64 with int64; cast one of them first$")),
    case("numpy-longdouble", lambda: ADD(np.ones(3, np.longdouble), X3), dtype_error(NUMPY_DTYPE.format(LONGDOUBLE.name)),
         NO_EXTENDED),
    case("numpy-longdouble-scalar", lambda: ADD(X3, np.longdouble(1)), dtype_error(NUMPY_DTYPE.format(LONGDOUBLE.name)),
         NO_EXTENDED),
    case("numpy-object", lambda: ADD(np.array([1.0, None], dtype=object), ONES2), dtype_error(NUMPY_DTYPE.format("object"))),
    case("numpy-unicode", lambda: ADD(np.array(["a", "b"]), ONES2), dtype_error(NUMPY_DTYPE.format("<U1"))),
    case("numpy-bytes", lambda: ADD(np.array([b"a", b"b"]), ONES2), dtype_error(NUMPY_DTYPE.format(r"\|S1"))),
    case("numpy-datetime64", lambda: ADD(np.array(["2020-01-01", "2021-01-01"], "datetime64[D]"), ONES2),
         dtype_error(NUMPY_DTYPE.format(r"datetime64\[D\]"))),
    case("numpy-timedelta64", lambda: ADD(np.array([1, 2], "timedelta64[s]"), ONES2), dtype_error(NUMPY_DTYPE.format(r"timedelta64\[s\]"))),
    case("numpy-structured", lambda: ADD(np.zeros(2, dtype=[("a", "f4")]), ONES2), dtype_error(r"numpy dtype \[\('a', '<f4'\)\] is not supported")),
    case("numpy-big-endian", lambda: ADD(np.ones(2, ">f8"), ONES2), dtype_error(NUMPY_DTYPE.format(">f8"))),
    case("array.array-unicode", lambda: ADD(array.array("u", "ab"), 1), dtype_error(NUMPY_DTYPE.format("<U1"))),
    case("torch-float16-with-complex-scalar", lambda: ADD(torch.ones(2, dtype=torch.float16), 1j),
         dtype_error(r"^float16 has no complex counterpart among the supported dtypes \(complex32 is not supported\)$")),
    # --- shapes and layouts
    case("shapes-do-not-broadcast", lambda: ADD(torch.ones(3), torch.ones(4)),
         Raises(ShapeError, ValueError, r"^input shapes \(3,\), \(4,\) cannot be broadcast together$")),
    case("shapes-do-not-broadcast-2d", lambda: ADD(np.ones((2, 3)), np.ones((3, 2))),
         Raises(ShapeError, ValueError, r"input shapes \(2, 3\), \(3, 2\) cannot be broadcast together")),
    case("strides-not-multiple-of-itemsize", lambda: INC(odd_strides_float64()),
         Raises(ShapeError, ValueError, r"^array strides \(12,\) are not multiples of its itemsize 8; pass a copy$")),
    case("0-d-tensors", lambda: (ADD(torch.tensor(1.5), torch.tensor(2.0)), torch.tensor(3.5)), SAME),
    case("0-d-arrays", lambda: (ADD(np.array(1.5), np.array(2)), np.asarray(np.array(1.5) + np.array(2))), SAME),
    case("empty-tensors", lambda: (ADD(torch.ones(0), torch.ones(0)), torch.ones(0) * 2), SAME),
    case("huge-shape-with-a-zero-dim-torch", lambda: (ADD(torch.empty(0, 10**9), torch.ones(1, 1)), torch.empty(0, 10**9)), SAME),
    case("huge-shape-with-a-zero-dim-numpy", lambda: (INC(np.empty((2**40, 0), np.float32)), np.empty((2**40, 0), np.float32)), SAME),
    case("negative-strides", lambda: (ADD(np.arange(5.0)[::-1], np.arange(5.0)), np.full(5, 4.0)), SAME),
    case("overlapping-input-views", lambda: (ADD(np.arange(6.0)[1:], np.arange(6.0)[:-1]), np.arange(1.0, 10.0, 2.0)), SAME),
    case("permuted-sliced-strides", lambda: (ADD(torch.arange(60.0).reshape(3, 4, 5).permute(2, 0, 1)[::2, :, 1::2], 1.0),
                                             torch.arange(60.0).reshape(3, 4, 5).permute(2, 0, 1)[::2, :, 1::2] + 1), SAME),
    case("20-dims-reversed", lambda: (ADD(torch.arange(2.0**20).reshape([2] * 20).permute(*reversed(range(20))), 1.0),
                                      torch.arange(2.0**20).reshape([2] * 20).permute(*reversed(range(20))) + 1), SAME),
    case("numpy-64-dims", lambda: (INC(np.ones([1] * 64)), np.full([1] * 64, 2.0)), SAME),
    case("broadcast-to-stride-0-input", lambda: (ADD(np.broadcast_to(np.arange(3.0), (4, 3)), 1.0), np.broadcast_to(np.arange(3.0), (4, 3)) + 1.0), SAME),
    case("unaligned-float64-input", lambda: (INC(unaligned_float64()), np.array([2.0, 3.0, 4.0])), SAME),
    case("read-only-input", lambda: (INC(read_only(np.arange(3.0))), np.arange(1.0, 4.0)), SAME),
    case("numpy-matrix", lambda: (ADD(np.matrix([[1.0, 2.0]]), np.matrix([[3.0, 4.0]])), np.array([[4.0, 6.0]])), SAME),
    # --- scalars of every kind: dtypes as torch.result_type / numpy.result_type (NEP 50)
    case("numpy-scalar-with-numpy", lambda: (ADD(np.float32(1.5), np.ones(3, np.float16)), np.float32(1.5) + np.ones(3, np.float16)), SAME),
    case("numpy-scalar-with-torch", lambda: (ADD(torch.ones(3, dtype=torch.int32), np.float64(1.5)),
                                             torch.ones(3, dtype=torch.int32) + np.float64(1.5)), SAME),
    case("python-bool-torch-int8", lambda: (ADD(t8(1, 2), True), t8(1, 2) + True), SAME),
    case("python-int-torch-int8", lambda: (ADD(t8(1, 2), 5), t8(1, 2) + 5), SAME),
    case("python-float-torch-int8", lambda: (ADD(t8(1, 2), 2.5), t8(1, 2) + 2.5), SAME),
    case("python-complex-torch-int64", lambda: (ADD(torch.arange(3), 1j), torch.arange(3) + 1j), SAME),
    case("python-int-torch-bool", lambda: (ADD(torch.tensor([True, False]), 5), torch.tensor([True, False]) + 5), SAME),
    case("python-bool-numpy-int8", lambda: (ADD(I8, True), I8 + True), SAME),
    case("python-float-numpy-int8", lambda: (ADD(I8, 2.5), I8 + 2.5), SAME),
    case("python-complex-numpy-float32", lambda: (ADD(np.ones(2, np.float32), 1j), np.ones(2, np.float32) + 1j), SAME),
    case("intenum-scalar", lambda: (ADD(torch.ones(2), Color.RED), torch.ones(2) + 3), SAME),
    case("fraction-scalar", lambda: (ADD(TF, fractions.Fraction(1, 2)), TF + 0.5), SAME),
    case("decimal-scalar", lambda: ADD(TF, decimal.Decimal("1.5")),
         dtype_error(r"^expected a bool, int, float or complex scalar, got Decimal: Decimal\('1\.5'\)$")),
    case("torch-0d-int64-with-float16", lambda: (ADD(torch.tensor(70000), torch.ones(2, dtype=torch.float16)),
                                                 torch.tensor(70000) + torch.ones(2, dtype=torch.float16)), SAME),
    case("torch-int8-with-uint8", lambda: (ADD(t8(1, -2), torch.ones(2, dtype=torch.uint8)), t8(1, -2) + torch.ones(2, dtype=torch.uint8)), SAME),
    case("numpy-int8-with-uint64", lambda: (ADD(I8, np.ones(3, np.uint64)), I8 + np.ones(3, np.uint64)), SAME),
    # --- out-of-range Python integers: torch wraps (and refuses beyond 64 bits), NumPy refuses
    case("2**64-torch-int64", lambda: ADD(torch.ones(2, dtype=torch.int64), 2**64),
         Raises(ScalarOverflowError, OverflowError, r"^Python integer 18446744073709551616 out of bounds for int64")),
    case("300-torch-int8-wraps", lambda: (ADD(t8(1, 2), 300), t8(1, 2) + 300), SAME),
    case("2**63-torch-int64-wraps", lambda: (ADD(torch.ones(2, dtype=torch.int64), 2**63), torch.ones(2, dtype=torch.int64) + 2**63), SAME),
    case("minus-1-torch-uint8-wraps", lambda: (ADD(torch.ones(2, dtype=torch.uint8), -1), torch.ones(2, dtype=torch.uint8) + -1), SAME),
    case("300-numpy-int8", lambda: ADD(I8, 300), Raises(ScalarOverflowError, OverflowError, r"^Python integer 300 out of bounds for int8$")),
    case("minus-1-numpy-uint64", lambda: ADD(np.ones(2, np.uint64), -1),
         Raises(ScalarOverflowError, OverflowError, r"^Python integer -1 out of bounds for uint64$")),
    case("2**70-numpy-float64", lambda: (ADD(ONES2, 2**70), ONES2 + 2**70), SAME),
    case("1e300-numpy-float32-is-inf", lambda: (ADD(np.ones(2, np.float32), 1e300), numpy_quietly(lambda: np.ones(2, np.float32) + 1e300)), SAME),
    case("2**64-torch-float32", lambda: ADD(torch.ones(2), 2**64),
         Raises(ScalarOverflowError, OverflowError, r"out of bounds")),
    # --- call-time kwargs
    case("unknown-kwarg", lambda: SCALE(TF, beta=1.0),
         Raises(UnknownKwargError, KeyError, r"beta is not declared in function definition \(declared: \['alpha'\]\)")),
    case("kwarg-naming-an-input", lambda: SCALE(TF, x=TF),
         Raises(UnknownKwargError, KeyError, r"x is not declared in function definition \(declared: \['alpha'\]\)")),
    case("kwarg-override-str", lambda: SCALE(TF, alpha="two"),
         dtype_error(r"^argument 'alpha' must be a bool, int, float or complex \(or a 1-element array\), got str$")),
    case("kwarg-override-None", lambda: SCALE(TF, alpha=None), dtype_error(r"argument 'alpha' must be .*got NoneType")),
    case("kwarg-override-empty-array", lambda: SCALE(TF, alpha=np.ones(0)), dtype_error(r"argument 'alpha' must be .*got ndarray")),
    case("kwarg-override-2-element-tensor", lambda: SCALE(TF, alpha=torch.ones(2)), dtype_error(r"argument 'alpha' must be .*got Tensor")),
    case("kwarg-override-2**63", lambda: SCALE(TF, alpha=2**63),
         Raises(ScalarOverflowError, OverflowError, r"^argument 'alpha' = 9223372036854775808 does not fit the int64_t it is passed as$")),
    case("kwarg-override-complex-for-float", lambda: SCALE(X3, alpha=1j), compile_error(r"cannot convert .jm_complex<double>. .*to .double.")),
    case("kwarg-override-1-element-tensor", lambda: (SCALE(TF, alpha=torch.tensor([3.0])), TF * 3), SAME),
    case("kwarg-override-bool", lambda: (SCALE(TF, alpha=True), TF * True), SAME),
    case("kwarg-override-requires-grad", backward_through_a_kwarg_that_requires_grad,
         Raises(GradientError, RuntimeError, r"argument 'alpha' requires grad.*no gradient could flow")),
    # --- what a kernel cannot read safely
    case("sparse-coo", lambda: ADD(TF.to_sparse(), TF),
         Raises(UnsupportedArrayError, TypeError, r"^sparse_coo tensors are not supported; jiter_magic reads dense \(strided\) tensors")),
    case("sparse-csr", lambda: ADD(torch.ones(2, 2).to_sparse_csr(), torch.ones(2, 2)),
         Raises(UnsupportedArrayError, TypeError, r"^sparse_csr tensors are not supported")),
    case("nested", lambda: INC(quiet(lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]))),
         Raises(UnsupportedArrayError, TypeError, r"^nested tensors are not supported")),
    case("quantized", lambda: INC(quiet(lambda: torch.quantize_per_tensor(TF, 0.1, 0, torch.qint8))),
         Raises(UnsupportedArrayError, TypeError, r"^quantized tensors are not supported.*\.dequantize\(\)")),
    case("subclass-with-torch-dispatch", lambda: INC(torch.Tensor._make_subclass(MyDispatch, TF)),
         Raises(UnsupportedArrayError, TypeError, r"^MyDispatch is a tensor subclass with its own dispatch: its data_ptr\(\) does not cover.*no other such subclass")),
    case("plain-subclass", lambda: (INC(TF.as_subclass(MyT)), TF + 1), SAME),
    case("masked-array", lambda: ADD(np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False]), X3),
         Raises(UnsupportedArrayError, TypeError, r"^masked arrays are not supported: a kernel would read the values under the mask")),
    case("storage-resized-to-nothing", lambda: INC(storage_resized_to_nothing()),
         Raises(UnsupportedArrayError, TypeError, r"^this tensor's view reaches byte 12 of its storage, which holds only 0")),
    case("storage-shrunk-below-the-view", lambda: INC(storage_shrunk_below_the_view()),
         Raises(UnsupportedArrayError, TypeError, r"^this tensor's view reaches byte 4000 of its storage, which holds "
                                                  r"only 8 bytes \(the storage was resized under the view")),
    # --- autograd and lazy views
    case("requires-grad-result-backward", backward_through_a_result,
         Raises(GradientError, RuntimeError, r"^bad_scale has no backward: give it one with bad_scale.def_backward\(code_string\)")),
    case("parameter-under-no-grad", lambda: (inc_without_grad(torch.nn.Parameter(TF.clone())), TF + 1), SAME),
    case("lazy-conj-view", lambda: (INC(torch.tensor([1 + 2j, 3 - 1j]).conj()), torch.tensor([1 + 2j, 3 - 1j]).conj() + 1), SAME),
    case("lazy-neg-view", lambda: (INC(torch.tensor([1 + 2j]).conj().imag), torch.tensor([1 + 2j]).conj().imag + 1), SAME),
    # --- buffers, sequences and other objects
    case("bytes", lambda: (ADD(b"\x01\x02", 1), np.frombuffer(b"\x01\x02", np.uint8) + 1), SAME),
    case("empty-bytes", lambda: (ADD(b"", 1), np.frombuffer(b"", np.uint8) + 1), SAME),
    case("bytearray-wraps-like-uint8", lambda: (ADD(bytearray(b"\x01\xff"), 1), np.frombuffer(b"\x01\xff", np.uint8) + 1), SAME),
    case("array.array-double", lambda: (ADD(array.array("d", [1.0, 2.0]), 1), np.asarray(array.array("d", [1.0, 2.0])) + 1), SAME),
    case("array.array-int64", lambda: (ADD(array.array("q", [1, 2]), 1), np.asarray(array.array("q", [1, 2])) + 1), SAME),
    case("memoryview-2d-int16", lambda: (ADD(memoryview(np.ones((2, 2), np.int16)), 1), np.ones((2, 2), np.int16) + 1), SAME),
    case("memoryview-strided", lambda: (ADD(memoryview(np.arange(10.0))[::2], 1.0), np.arange(10.0)[::2] + 1), SAME),
    case("ctypes-array", lambda: (ADD((ctypes.c_double * 3)(1, 2, 3), 1.0), np.ctypeslib.as_array((ctypes.c_double * 3)(1, 2, 3)) + 1.0), SAME),
    case("object-with-__array__", lambda: (ADD(ArrayLike(), ONES2[:1]), np.arange(1.0, 4.0)), SAME),
    case("list-of-numbers", lambda: ADD([1.0, 2.0], ONES2), dtype_error(NOT_AN_ARRAY + "list$")),
    case("tuple-of-numbers", lambda: ADD(ONES2, (1.0, 2.0)), dtype_error(NOT_AN_ARRAY + "tuple$")),
    case("generator", lambda: ADD((i for i in range(2)), ONES2), dtype_error(NOT_AN_ARRAY + "generator$")),
    case("None", lambda: ADD(None, TF), dtype_error(NOT_AN_ARRAY + "NoneType$")),
    case("dict", lambda: ADD({"a": 1}, TF), dtype_error(NOT_AN_ARRAY + "dict$")),
    case("str", lambda: ADD("ab", TF), dtype_error(NOT_AN_ARRAY + "str$")),
]


@pytest.mark.slow
@pytest.mark.parametrize("make,expect", CALL_CASES)
def test_call_arguments(make, expect):
    check(make, expect)


# ============================================================================= out=
def same_object(result: Any, out: Any) -> Any:
    assert result is out, "out= must be returned itself"
    return result


def out_castable():
    o = torch.empty(3, dtype=torch.float64)
    return same_object(ADD(TF, TF, out=o), o), (TF + TF).double()


def out_aliases_input():
    a = torch.arange(3.0)
    return same_object(ADD(a, a, out=a), a), torch.tensor([0.0, 2.0, 4.0])


def out_non_contiguous():
    base = torch.zeros(6)
    view = base[::2]
    same_object(INC(TF, out=view), view)
    return base, torch.tensor([1.0, 0.0, 2.0, 0.0, 3.0, 0.0])  # the elements between are untouched


def out_internal_overlap():
    base = torch.zeros(4)
    ADD(torch.ones(3, 2), torch.arange(6.0).reshape(3, 2), out=base.as_strided((3, 2), (1, 1)))


def outs_overlap_each_other():
    base = torch.zeros(4)
    TWO(TF, out=(base[:3], base[1:]))


def outs_interleaved():
    """Two outputs that share a buffer but no element (every other float each) are fine."""
    base = torch.zeros(6)
    first, second = TWO(TF, out=(base[0::2], base[1::2]))
    assert first.data_ptr() == base.data_ptr() and second.data_ptr() == base.data_ptr() + 4
    return torch.stack([first, second]), torch.stack([TF + 1, TF - 1])


def out_over_a_broadcast_input():
    x = torch.zeros(3)
    ADD(x[:1].expand(3), 1.0, out=x)


def out_of_another_dtype_over_the_input_bytes():
    buffer = np.zeros(16, np.uint8)
    small = buffer[:8].view(np.int16)  # 4 int16 in bytes 0-7
    INC(small, out=buffer.view(np.float32))  # 4 float32 in bytes 0-15: element 1 covers inputs 2 and 3


def out_writable_stride_0():
    INC(X3, out=np.lib.stride_tricks.as_strided(np.zeros(1), (3,), (0,), writeable=True))


def two_outputs_into_a_list():
    s, d = torch.empty(3), torch.empty(3)
    got = TWO(TF, out=[s, d])
    assert got[0] is s and got[1] is d
    return got, (TF + 1, TF - 1)


def fault_while_writing_out():
    x, o = np.arange(1, 5), np.full(4, -7)
    try:
        DIV(x, np.array([1, 1, 0, 1]), out=o)
    finally:
        assert x.tolist() == [1, 2, 3, 4]  # inputs are untouched; the outputs may be partly written


OUT_CASES = [
    case("too-few-outputs", lambda: TWO(TF, out=(torch.empty(3),)), bind_error(r"^bad_two has 2 output\(s\), but out= gives 1$")),
    case("too-many-outputs", lambda: TWO(TF, out=(torch.empty(3),) * 3), bind_error(r"^bad_two has 2 output\(s\), but out= gives 3$")),
    case("one-array-for-two-outputs", lambda: TWO(TF, out=torch.empty(3)), bind_error(r"bad_two has 2 output\(s\), but out= gives 1")),
    case("wrong-shape", lambda: ADD(TF, TF, out=torch.empty(4)),
         Raises(ShapeError, ValueError, r"^out= has shape \(4,\), but the result has shape \(3,\)$")),
    case("larger-broadcastable-shape", lambda: ADD(TF, TF, out=torch.empty(2, 3)),
         Raises(ShapeError, ValueError, r"out= has shape \(2, 3\), but the result has shape \(3,\)")),
    case("smaller-shape", lambda: INC(torch.ones(2, 3), out=torch.empty(3)),
         Raises(ShapeError, ValueError, r"out= has shape \(3,\), but the result has shape \(2, 3\)")),
    case("float-into-int-torch", lambda: ADD(TF, TF, out=torch.empty(3, dtype=torch.int32)),
         dtype_error(r"^result type float32 can't be cast to the desired output type int32 \(out=\)$")),
    case("float-into-int-numpy", lambda: ADD(X3, X3, out=np.empty(3, np.int32)),
         dtype_error(r"result type float64 can't be cast to the desired output type int32 \(out=\)")),
    case("complex-into-float", lambda: INC(TF.to(torch.complex64), out=torch.empty(3)),
         dtype_error(r"result type complex64 can't be cast to the desired output type float32")),
    case("int-into-bool", lambda: INC(torch.arange(3), out=torch.empty(3, dtype=torch.bool)),
         dtype_error(r"result type int64 can't be cast to the desired output type bool")),
    case("int64-into-uint64-numpy", lambda: INC(np.arange(3), out=np.empty(3, np.uint64)),
         dtype_error(r"result type int64 can't be cast to the desired output type uint64")),
    case("scalar-float-into-int8-numpy", lambda: ADD(I8, 2.5, out=np.empty(3, np.int8)),
         dtype_error(r"result type float64 can't be cast to the desired output type int8")),
    case("castable-float32-into-float64", out_castable, SAME),
    case("downcast-float64-into-float32-torch", lambda: (ADD(TF.double(), TF.double(), out=torch.empty(3)), TF * 2), SAME),
    case("downcast-float64-into-float32-numpy", lambda: (ADD(X3, X3, out=np.empty(3, np.float32)), (X3 * 2).astype(np.float32)), SAME),
    case("numpy-out-for-torch-inputs", lambda: ADD(TF, TF, out=np.empty(3, np.float32)),
         Raises(DeviceError, RuntimeError, r"^out= must be a torch array like the inputs, got ndarray$")),
    case("meta-out", lambda: ADD(TF, TF, out=torch.empty(3, device="meta")), Raises(DeviceError, RuntimeError, r"tensors on 'meta'")),
    case("sparse-out", lambda: ADD(TF, TF, out=torch.zeros(3).to_sparse()),
         Raises(UnsupportedArrayError, TypeError, r"sparse_coo tensors are not supported")),
    case("read-only-numpy-out", lambda: ADD(X3, X3, out=read_only(np.empty(3))),
         Raises(InvalidArgumentError, ValueError, r"^out= array is read-only; pass a writable array$")),
    case("broadcast_to-numpy-out", lambda: ADD(X3, X3, out=np.broadcast_to(np.zeros(1), (3,))),
         Raises(InvalidArgumentError, ValueError, r"out= array is read-only")),
    case("expanded-torch-out", lambda: ADD(TF, TF, out=torch.empty(1).expand(3)),
         Raises(ShapeError, ValueError, r"^out= has an expanded \(stride 0\) dimension: several results would land on one element$")),
    case("writable-stride-0-numpy-out", out_writable_stride_0, Raises(ShapeError, ValueError, r"out= has an expanded \(stride 0\) dimension")),
    case("out-with-internal-overlap", out_internal_overlap, Raises(ShapeError, ValueError, r"^out= has elements that refer to the same memory \(shape \(3, 2\), strides \(1, 1\) in elements\)")),
    case("two-outputs-overlapping-each-other", outs_overlap_each_other,
         Raises(ShapeError, ValueError, r"^out= arrays 0 and 1 overlap each other")),
    case("two-outputs-interleaved-without-overlap", outs_interleaved, SAME),
    case("out-aliases-input-exactly", out_aliases_input, SAME),
    case("out-partially-overlaps-input", lambda: (lambda x: INC(x[1:], out=x[:-1]))(torch.arange(4.0)),
         Raises(ShapeError, ValueError, r"^out= partially overlaps an input: some elements of the input and the written-to "
                                        r"array refer to the same memory; pass a separate output or the input itself$")),
    case("out-is-the-transposed-input", lambda: (lambda a: INC(a, out=a.T))(np.arange(4.0).reshape(2, 2)),
         Raises(ShapeError, ValueError, r"out= partially overlaps an input")),
    case("out-under-a-broadcast-input", out_over_a_broadcast_input, Raises(ShapeError, ValueError, r"out= partially overlaps an input")),
    case("out-of-another-dtype-over-the-input", out_of_another_dtype_over_the_input_bytes,
         Raises(ShapeError, ValueError, r"out= partially overlaps an input")),
    case("out-requires-grad", lambda: ADD(TF, TF, out=torch.empty(3, requires_grad=True)),
         Raises(GradientError, RuntimeError, r"^functions with out=\.\.\. arguments don't support automatic differentiation, "
                                             r"but one of the arguments requires grad; call it under torch\.no_grad\(\)$")),
    case("input-requires-grad-with-out", lambda: INC(torch.ones(3, requires_grad=True), out=torch.empty(3)),
         Raises(GradientError, RuntimeError, r"functions with out=\.\.\. arguments don't support automatic differentiation")),
    case("lazy-conj-out", lambda: INC(TF.to(torch.complex64), out=torch.empty(3, dtype=torch.complex64).conj()),
         Raises(InvalidArgumentError, ValueError, r"^out= must not be a lazy conj/neg view; pass a plain tensor$")),
    case("lazy-neg-out", lambda: INC(TF, out=torch.empty(3, dtype=torch.complex64).conj().imag),
         Raises(InvalidArgumentError, ValueError, r"out= must not be a lazy conj/neg view")),
    case("tuple-for-one-output", lambda: (ADD(TF, TF, out=(torch.empty(3),)), TF * 2), SAME),
    case("list-for-one-output", lambda: (ADD(TF, TF, out=[torch.empty(3)]), TF * 2), SAME),
    case("list-for-two-outputs", two_outputs_into_a_list, SAME),
    case("empty-out", lambda: (INC(torch.empty(0), out=torch.empty(0)), torch.empty(0)), SAME),
    case("0-d-out", lambda: (INC(torch.tensor(1.0), out=torch.empty(())), torch.tensor(2.0)), SAME),
    case("non-contiguous-out", out_non_contiguous, SAME),
    case("fault-while-writing-out", fault_while_writing_out,
         Raises(IntegerDivisionError, ZeroDivisionError, r"^bad_div: integer division or remainder by zero")),
    case("python-int-as-out", lambda: ADD(TF, TF, out=5), Raises((DTypeError, ArgumentTypeError, BindError), TypeError, r"out=")),
    case("python-list-of-floats-as-out", lambda: ADD(TF, TF, out=[0.0, 0.0, 0.0]),
         Raises((DTypeError, ArgumentTypeError, BindError), TypeError, r"out=.*(array|tensor|float)")),
]


@pytest.mark.slow
@pytest.mark.parametrize("make,expect", OUT_CASES)
def test_out(make, expect):
    check(make, expect)


def test_out_bumps_the_version_counter_so_autograd_sees_the_write():
    weight = torch.full((3,), 2.0)
    x = torch.ones(3, requires_grad=True)
    loss = (x * weight).sum()  # saves `weight` for backward
    version = weight._version
    INC(weight, out=weight)
    assert weight._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    good_call_works()


# ============================================================================= faults in functors on the CPU
ZERO_DIVISION = Raises(IntegerDivisionError, ZeroDivisionError,
                       r"^bad_{}: integer division or remainder by zero in the functor \(or the most negative integer divided by -1\)$")


def zero_division(name: str) -> Raises:
    return ZERO_DIVISION._replace(pattern=ZERO_DIVISION.pattern.format(name))


def kernel_fault(name: str, what: str) -> Raises:
    return Raises(KernelFaultError, RuntimeError, rf"^bad_{name}: the functor {what}")


SEGV = "raised SIGSEGV \\(an invalid memory access or instruction\\); the call was abandoned"
half_zero = np.ones(200_003, np.int32)
half_zero[100_001] = 0

FAULT_CASES = [
    case("div-zero-int8-numpy", lambda: DIV(np.array([1, 2, 3], np.int8), np.array([1, 0, 1], np.int8)), zero_division("div")),
    case("div-zero-uint8-torch", lambda: DIV(torch.ones(3, dtype=torch.uint8), torch.zeros(3, dtype=torch.uint8)), zero_division("div")),
    case("rem-zero-int16-numpy", lambda: REM(np.arange(3, dtype=np.int16), np.zeros(3, np.int16)), zero_division("rem")),
    case("rem-zero-int32-torch", lambda: REM(torch.arange(3, dtype=torch.int32), torch.zeros(3, dtype=torch.int32)), zero_division("rem")),
    case("div-zero-int64-by-python-0", lambda: DIV(torch.arange(3), 0), zero_division("div")),
    case("rem-zero-uint64-numpy", lambda: REM(np.arange(3, dtype=np.uint64), np.zeros(3, np.uint64)), zero_division("rem")),
    case("div-zero-in-one-of-the-openmp-threads", lambda: DIV(np.ones(200_003, np.int32), half_zero), zero_division("div")),
    case("int64-min-div-minus-1", lambda: DIV(torch.tensor([-2**63, 4]), torch.tensor([-1, 2])), zero_division("div")),
    case("int32-min-rem-minus-1", lambda: REM(np.array([-2**31], np.int32), np.array([-1], np.int32)), zero_division("rem")),
    case("int8-min-div-minus-1-promotes", lambda: (DIV(t8(-128, 7), t8(-1, 2)), torch.div(t8(-128, 7), t8(-1, 2), rounding_mode="trunc")), SAME),
    case("float-div-zero-is-inf", lambda: (DIV(np.array([1.0, -1.0, 0.0]), np.zeros(3)), numpy_quietly(lambda: np.array([1.0, -1.0, 0.0]) / np.zeros(3))), SAME),
    case("null-read", lambda: NULL_READ(X3), kernel_fault("null_read", SEGV)),
    case("null-write", lambda: NULL_WRITE(np.ones(100_000)), kernel_fault("null_write", SEGV)),
    case("far-write-through-a-pointer-cast", lambda: FAR_WRITE(X3), kernel_fault("far_write", SEGV)),
    case("trap-is-sigill", lambda: TRAP(X3), kernel_fault("trap", "raised SIGILL")),
    case("throw-std-runtime-error", lambda: THROW_STD(X3), kernel_fault("throw", "threw a C\\+\\+ exception: x is too big$")),
    case("throw-int", lambda: THROW_INT(X3), kernel_fault("throw_int", "threw a C\\+\\+ exception: an exception that is not a std::exception$")),
    case("throw-string-literal", lambda: THROW_LITERAL(X3), kernel_fault("throw_literal", "threw a C\\+\\+ exception: an exception that is not a std::exception$")),
    case("huge-new-throws-bad-array-new-length", lambda: BAD_ALLOC(X3), kernel_fault("alloc", "threw a C\\+\\+ exception: std::bad_array_new_length$")),
]


@pytest.mark.slow
@pytest.mark.parametrize("make,expect", FAULT_CASES)
def test_faults_in_functors(make, expect):
    check(make, expect)


# ----------------------------------------------------------------------------- hostile code that would end a process
CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    import jiter_magic
    fn = jiter_magic.create_jit_fn(os.environ["JM_CODE"])
    try:
        print("OK", fn(np.ones(2)).tolist(), flush=True)
    except jiter_magic.JiterError as exc:
        print("ERROR", type(exc).__name__, str(exc).splitlines()[0], flush=True)
    print("ALIVE", flush=True)
""")

HOSTILE_IN_A_CHILD = [
    pytest.param("#define return throw\ntemplate <typename T> T returns_throw(T x) { return x + T(1); }",
                 id="define-return-throw"),
    pytest.param("struct Boom { Boom() { throw 1; } } boom;\ntemplate <typename T> T init_throws(T x) { return x; }",
                 id="static-initializer-throws"),
    pytest.param("struct Seg { Seg() { volatile int* volatile p = 0; *p = 1; } } seg;\n"
                 "template <typename T> T init_faults(T x) { return x; }",
                 id="static-initializer-segfaults"),
]


@pytest.mark.slow
@pytest.mark.parametrize("code", HOSTILE_IN_A_CHILD)
def test_hostile_code_does_not_end_the_process(code, tmp_path):
    """Run in a child process: the call must end in a JiterError (or the right values), and the process go on."""
    env = dict(os.environ, JM_CODE=code, PYTHONPATH=REPO, JITER_MAGIC_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-500:])
    lines = done.stdout.splitlines()
    assert lines[-1] == "ALIVE"
    assert lines[0] == "OK [2.0, 2.0]" or lines[0].split()[:2] in (["ERROR", "CompileError"], ["ERROR", "KernelFaultError"],
                                                                    ["ERROR", "LaunchError"]), lines


# ============================================================================= cache states
CX, CY = np.arange(5.0), np.full(5, 2.0)
CWANT = CX * CY + 3


def unique_fn(tag: str) -> jiter_magic.JitFunction:
    """A function no other test (nor the process-wide kernel pool) has: its kernels come from this test's cache."""
    return jit(f"template <typename T> T cache_{tag}_{uuid.uuid4().hex[:8]}(T x, T y) {{ return x * y + T(3); }}")


def use_root(monkeypatch, root) -> None:
    monkeypatch.setenv("JITER_MAGIC_CACHE_DIR", str(root))
    monkeypatch.delenv("JITER_MAGIC_DISK_CACHE", raising=False)


def cache_messages(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in record if issubclass(w.category, (CacheWarning, SettingWarning))]


def computes(fn, dtype=np.float64) -> list[str]:
    """One call: the right values; the CacheWarnings and SettingWarnings it gave."""
    result, messages = cache_messages(lambda: fn(CX.astype(dtype), CY.astype(dtype)))
    assert_same(result, (CX * CY + 3).astype(dtype))
    return messages


def reload(fn, dtype=np.float64) -> list[str]:
    """Forget every loaded kernel and plan (the disk stays), then call: the kernel comes from disk or a compile."""
    jiter_magic.clear_cache(memory=True, disk=False)
    return computes(fn, dtype)


def memory_only(messages: list[str], root, what: str) -> None:
    """Exactly one warning, naming the root and what is wrong; the disk layer is off for this root."""
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"jiter_magic: cache directory {root} ") and what in messages[0], messages[0]
    assert "caching compiled kernels in memory only for this process" in messages[0]
    assert jiter_magic.cache_stats()["writable"] is False


def discarded_and_healed(tmp_path, monkeypatch, damage: Callable[[str, str], None], why: str) -> None:
    """Compile float64 and float32 entries, damage the float64 one, reload: one warning `why`, a compile,
    the right values; reload again: a clean disk hit (the entry was rewritten)."""
    use_root(monkeypatch, tmp_path / "cache")
    fn = unique_fn("damaged")
    assert computes(fn) == [] and computes(fn, np.float32) == []
    entry64, entry32 = fn.specializations[0].cache_file, fn.specializations[1].cache_file
    assert entry64 and entry32 and entry64 != entry32
    damage(entry64, entry32)
    why = why.format(other=os.path.basename(entry32)[:16])
    messages = reload(fn)
    assert len(messages) == 1 and messages[0] == f"jiter_magic: cache entry {entry64} {why}; discarding it and recompiling", messages
    stats = jiter_magic.cache_stats()
    assert stats["compiles"] == 1 and stats["disk_hits"] == 0 and stats["corrupt_entries"] == 1
    assert fn.specializations[-1].cache_event == "compiled"
    assert reload(fn) == []
    assert fn.specializations[-1].cache_event == "disk" and jiter_magic.cache_stats()["disk_hits"] == 1


def flip_a_byte(entry: str, _other: str) -> None:
    data = bytearray(open(entry, "rb").read())
    data[len(data) // 2] ^= 0xFF
    with open(entry, "wb") as handle:
        handle.write(data)


def symlink_entry(entry: str, _other: str) -> None:
    planted = entry + ".planted"
    shutil.move(entry, planted)
    os.symlink(planted, entry)


def garbage_payload(entry: str, _other: str) -> None:
    key = os.path.basename(entry)[: -len(".bin")]
    with open(entry, "wb") as handle:  # a right header and checksum around bytes that are no library
        handle.write(cache_module._pack("cpu", key, b"\x7fELF but not really a shared library"))


def cache_root_is_a_file(tmp_path, monkeypatch):
    root = tmp_path / "a_file"
    root.write_text("not a folder")
    use_root(monkeypatch, root)
    fn = unique_fn("file")
    memory_only(computes(fn), root, f"is not private: {root} is not a folder")
    assert computes(fn, np.float32) == []  # one warning, not one per kernel
    assert root.read_text() == "not a folder"


def cache_root_under_a_file(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("x")
    root = tmp_path / "a_file" / "cache"
    use_root(monkeypatch, root)
    fn = unique_fn("under_file")
    memory_only(computes(fn), root, "is not writable ([Errno 20] Not a directory")
    assert computes(fn, np.float32) == []


def cache_root_read_only(tmp_path, monkeypatch):
    if AS_ROOT:
        pytest.skip("root writes into a mode 0500 folder; cache-root-under-a-file covers an unwritable root")
    root = tmp_path / "read_only"
    root.mkdir(mode=0o500)
    use_root(monkeypatch, root)
    memory_only(computes(unique_fn("read_only")), root, "is not writable")


def cache_root_group_writable(tmp_path, monkeypatch):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o770)
    use_root(monkeypatch, root)
    fn = unique_fn("group")
    messages = computes(fn)
    memory_only(messages, root, f"{root} is writable by group or others (mode 0770)")
    assert f"Fix: run `chmod go-w {root}`" in messages[0]
    assert os.listdir(root) == []  # nothing written where another user could plant code


def cache_subfolder_world_writable(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    use_root(monkeypatch, root)
    fn = unique_fn("world")
    assert computes(fn) == []
    os.chmod(root / "cpu", 0o777)
    messages = reload(fn)
    memory_only(messages, root, f"{root / 'cpu'} is writable by group or others (mode 0777)")
    assert fn.specializations[-1].cache_event == "compiled"  # the planted-into folder was not read


def cache_root_link_to_missing(tmp_path, monkeypatch):
    root = tmp_path / "link"
    os.symlink(tmp_path / "nowhere", root)
    use_root(monkeypatch, root)
    memory_only(computes(unique_fn("dangling")), root, f"{root} is a symbolic link to a missing folder")


def cache_corrupt_entry(tmp_path, monkeypatch):
    discarded_and_healed(tmp_path, monkeypatch, flip_a_byte, "is truncated, corrupt or not ours")


def cache_truncated_entry(tmp_path, monkeypatch):
    discarded_and_healed(tmp_path, monkeypatch, lambda e, _o: os.truncate(e, os.path.getsize(e) // 2),
                         "is truncated, corrupt or not ours")


def cache_empty_entry(tmp_path, monkeypatch):
    discarded_and_healed(tmp_path, monkeypatch, lambda e, _o: open(e, "wb").close(), "is truncated, corrupt or not ours")


def cache_entry_copied_from_another_key(tmp_path, monkeypatch):
    discarded_and_healed(tmp_path, monkeypatch, lambda e, o: shutil.copyfile(o, e),
                         "holds the kernel of another key (cpu/{other}...), e.g. a copied file")


def cache_symlinked_entry(tmp_path, monkeypatch):
    discarded_and_healed(tmp_path, monkeypatch, symlink_entry, "is a symbolic link (not followed)")


def cache_fifo_entry(tmp_path, monkeypatch):
    discarded_and_healed(tmp_path, monkeypatch, lambda e, _o: (os.remove(e), os.mkfifo(e)), "is not a regular file")


def cache_entry_replaced_by_a_folder(tmp_path, monkeypatch):
    discarded_and_healed(tmp_path, monkeypatch,
                         lambda e, _o: (os.remove(e), os.mkdir(e), open(os.path.join(e, "planted"), "w").close()),
                         "is not a regular file")


def cache_entry_with_a_garbage_payload(tmp_path, monkeypatch):
    use_root(monkeypatch, tmp_path / "cache")
    fn = unique_fn("garbage")
    assert computes(fn) == []
    entry = fn.specializations[-1].cache_file
    garbage_payload(entry, "")
    messages = reload(fn)
    assert len(messages) == 1 and messages[0].startswith(f"jiter_magic: cache entry {entry} could not be loaded ("), messages
    assert messages[0].endswith("; discarding it and recompiling")
    assert fn.specializations[-1].cache_event == "compiled"
    assert reload(fn) == [] and fn.specializations[-1].cache_event == "disk"


def cache_disabled(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    use_root(monkeypatch, root)
    monkeypatch.setenv("JITER_MAGIC_DISK_CACHE", "0")
    fn = unique_fn("disabled")
    assert computes(fn) == [] and reload(fn) == []
    assert jiter_magic.cache_dir() is None and not root.exists()
    stats = jiter_magic.cache_stats()
    assert stats["enabled"] is False and stats["entries"] == 0 and stats["compiles"] == 1  # no disk: compiled again


def cache_cleared_while_functions_exist(tmp_path, monkeypatch):
    use_root(monkeypatch, tmp_path / "cache")
    fn = unique_fn("cleared")
    assert computes(fn) == []
    jiter_magic.clear_cache()  # disk and memory, with `fn` alive
    assert jiter_magic.cache_stats()["entries"] == 0
    assert computes(fn) == []
    assert jiter_magic.cache_stats()["compiles"] == 1 and fn.specializations[-1].cache_event == "compiled"


def cache_folder_deleted_between_calls(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    use_root(monkeypatch, root)
    fn = unique_fn("deleted")
    assert computes(fn) == []
    shutil.rmtree(root)
    assert reload(fn) == []
    assert fn.specializations[-1].cache_event == "compiled" and os.path.isfile(fn.specializations[-1].cache_file)
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700


def cache_relative_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    use_root(monkeypatch, "relative/cache")
    fn = unique_fn("relative")
    assert computes(fn) == []
    assert jiter_magic.cache_dir() == str(tmp_path / "relative" / "cache")
    assert fn.specializations[-1].cache_file.startswith(str(tmp_path / "relative" / "cache") + os.sep)


def cache_max_bytes_not_a_number(tmp_path, monkeypatch):
    use_root(monkeypatch, tmp_path / "cache")
    text = f"lots-{uuid.uuid4().hex[:6]}"  # the setting warns once per value and process
    monkeypatch.setenv("JITER_MAGIC_CACHE_MAX_BYTES", text)
    messages = computes(unique_fn("max_bytes"))
    assert messages == [f"jiter_magic: JITER_MAGIC_CACHE_MAX_BYTES={text!r} is not valid: expected a positive size in "
                        "bytes, such as 1073741824, 500M or 2G; using the default, 1073741824"]


def cache_max_bytes_one(tmp_path, monkeypatch):
    use_root(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("JITER_MAGIC_CACHE_MAX_BYTES", "1")
    fn = unique_fn("tiny")
    assert computes(fn) == [] and computes(fn, np.float32) == []
    stats = jiter_magic.cache_stats()
    assert stats["entries"] == 1 and stats["evictions"] >= 1  # the newest entry alone is kept


def cache_lock_timeout_not_a_number(tmp_path, monkeypatch):
    use_root(monkeypatch, tmp_path / "cache")
    text = f"soon-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("JITER_MAGIC_CACHE_LOCK_TIMEOUT", text)
    messages = computes(unique_fn("lock_timeout"))
    assert messages == [f"jiter_magic: JITER_MAGIC_CACHE_LOCK_TIMEOUT={text!r} is not valid: expected seconds, a "
                        "number >= 0; using the default, 60.0"]


CACHE_CASES = [
    pytest.param(cache_root_is_a_file, id="root-is-a-file"),
    pytest.param(cache_root_under_a_file, id="root-under-a-file-unwritable"),
    pytest.param(cache_root_read_only, id="root-read-only-0500"),
    pytest.param(cache_root_group_writable, id="root-group-writable"),
    pytest.param(cache_subfolder_world_writable, id="subfolder-world-writable"),
    pytest.param(cache_root_link_to_missing, id="root-link-to-missing-folder"),
    pytest.param(cache_corrupt_entry, id="corrupt-entry"),
    pytest.param(cache_truncated_entry, id="truncated-entry"),
    pytest.param(cache_empty_entry, id="empty-entry"),
    pytest.param(cache_entry_copied_from_another_key, id="entry-copied-from-another-key"),
    pytest.param(cache_symlinked_entry, id="symlinked-entry"),
    pytest.param(cache_fifo_entry, id="fifo-entry"),
    pytest.param(cache_entry_replaced_by_a_folder, id="entry-replaced-by-a-folder"),
    pytest.param(cache_entry_with_a_garbage_payload, id="entry-with-a-garbage-payload"),
    pytest.param(cache_disabled, id="disk-cache-disabled"),
    pytest.param(cache_cleared_while_functions_exist, id="clear_cache-while-functions-exist"),
    pytest.param(cache_folder_deleted_between_calls, id="cache-folder-deleted-between-calls"),
    pytest.param(cache_relative_root, id="relative-cache-dir"),
    pytest.param(cache_max_bytes_not_a_number, id="max-bytes-not-a-number"),
    pytest.param(cache_max_bytes_one, id="max-bytes-one"),
    pytest.param(cache_lock_timeout_not_a_number, id="lock-timeout-not-a-number"),
]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", CACHE_CASES)
def test_cache_states(scenario, tmp_path, monkeypatch):
    scenario(tmp_path, monkeypatch)
    monkeypatch.undo()  # back to the session's cache, where the shared functions' kernels are
    good_call_works()


# ============================================================================= concurrency
def run_threads(count: int, target: Callable[[int], None]) -> list[BaseException]:
    """Start `count` threads at once (a barrier); the exceptions they raised."""
    barrier, errors = threading.Barrier(count), []

    def run(index: int) -> None:
        barrier.wait()
        try:
            target(index)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a thread hangs"
    return errors


@pytest.mark.slow
def test_eight_threads_call_one_function_on_eight_dtypes_at_once():
    fn = jit(f"template <typename T> T conc_dtypes_{TAG}(T x, T y) {{ return x * y + T(1); }}")
    dtypes = [np.int8, np.uint8, np.int16, np.int32, np.int64, np.float32, np.float64, np.complex64]
    results: list[Any] = [None] * 8

    def call(index: int) -> None:
        x = (np.arange(1, 40) % 7).astype(dtypes[index])
        for _ in range(5):  # a compile, then plans, then the hot path
            results[index] = fn(x, x)

    assert run_threads(8, call) == []
    for dtype, result in zip(dtypes, results):
        x = (np.arange(1, 40) % 7).astype(dtype)
        assert_same(result, x * x + dtype(1))
    assert len(fn.specializations) == 8
    good_call_works()


def test_eight_threads_create_and_call_one_new_function_on_a_cold_cache(fresh_cache):
    code = f"template <typename T> T conc_cold_{uuid.uuid4().hex[:8]}(T x) {{ return x - T(2); }}"
    results: list[Any] = [None] * 8
    before = jiter_magic.cache_stats()

    def create_and_call(index: int) -> None:
        results[index] = jit(code)(np.arange(5.0))

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert run_threads(8, create_and_call) == []
    assert [w for w in record if issubclass(w.category, CacheWarning)] == []
    for result in results:
        assert_same(result, np.arange(5.0) - 2)
    after = jiter_magic.cache_stats()
    assert after["compiles"] - before["compiles"] == 1  # exactly one compile
    good_call_works()


def test_eight_threads_hit_the_fault_paths_at_once():
    faults = [
        (lambda: DIV(np.arange(5), np.zeros(5, np.int64)), IntegerDivisionError, "bad_div: integer division"),
        (lambda: NULL_READ(np.ones(1000)), KernelFaultError, "bad_null_read: the functor raised SIGSEGV"),
        # the what() text is left to the test below: concurrent throws lose or swap it (a package bug)
        (lambda: THROW_STD(np.arange(50.0)), KernelFaultError, "bad_throw: the functor threw a C++ exception: "),
        (lambda: TRAP(np.arange(50.0)), KernelFaultError, "bad_trap: the functor raised SIGILL"),
    ]
    seen: list[list[BaseException]] = [[] for _ in range(8)]

    def fault_then_compute(index: int) -> None:
        make, _error, _message = faults[index % 4]
        for _ in range(10):
            try:
                make()
            except JiterError as exc:
                seen[index].append(exc)
            good_call_works()

    assert run_threads(8, fault_then_compute) == []
    for index, errors in enumerate(seen):
        _make, error, message = faults[index % 4]
        assert len(errors) == 10, (index, errors)
        wrong = [f"{type(e).__name__}: {e}" for e in errors if type(e) is not error or not str(e).startswith(message)]
        assert wrong == [], (index, wrong)
    good_call_works()


THROWS_A = jit('#include <stdexcept>\n'
               'template <typename T> T throws_a(T x) { if (x > T(1)) throw std::runtime_error("message of a"); return x; }')
THROWS_B = jit('#include <stdexcept>\n'
               'template <typename T> T throws_b(T x) { if (x > T(1)) throw std::runtime_error("message of b"); return x; }')


def test_concurrent_cpp_exceptions_keep_their_own_messages():
    x = np.arange(8.0)
    for fn in (THROWS_A, THROWS_B):  # compiled before the threads start, so that all of them throw at once
        with pytest.raises(KernelFaultError):
            fn(x)
    wrong: list[str] = []

    def throw_many(index: int) -> None:
        fn, own = (THROWS_A, "a") if index % 2 else (THROWS_B, "b")
        for _ in range(250):
            try:
                fn(x)
            except KernelFaultError as exc:
                if str(exc) != f"throws_{own}: the functor threw a C++ exception: message of {own}":
                    wrong.append(str(exc))
            else:
                wrong.append("no exception")

    assert run_threads(8, throw_many) == []
    assert wrong == [], f"{len(wrong)} of 2000 wrong, e.g. {sorted(set(wrong))[:4]}"
    good_call_works()


@pytest.mark.slow
def test_clear_cache_from_another_thread_while_calls_run():
    fn = jit(f"template <typename T> T conc_clear_{TAG}(T x, T y) {{ return x * y + T(1); }}")
    x = np.arange(200_000, dtype=np.float64)
    want = x * x + 1
    stop = time.monotonic() + 1.5
    calls = [0] * 4

    def work(index: int) -> None:
        if index == 4:
            while time.monotonic() < stop:
                jiter_magic.clear_cache(memory=True, disk=False)
                time.sleep(0.005)
            return
        while time.monotonic() < stop:
            np.testing.assert_allclose(fn(x, x), want, rtol=1e-12)
            calls[index] += 1

    assert run_threads(5, work) == []
    assert all(count > 0 for count in calls), calls
    good_call_works()


RACE = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    import jiter_magic
    fn = jiter_magic.create_jit_fn(sys.argv[2])
    x = np.linspace(-3, 3, 1001)
    print("ready", flush=True)
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.005)
    result = fn(x, x)
    stats = jiter_magic.cache_stats()
    print(json.dumps({"ok": bool(np.allclose(result, x * x - 7, rtol=1e-12)), "compiles": stats["compiles"],
                      "disk_hits": stats["disk_hits"]}), flush=True)
""")


@pytest.mark.slow
def test_eight_processes_on_one_cold_cache_compile_once(tmp_path):
    root, go = tmp_path / "cold", tmp_path / "go"
    code = f"template <typename T> T conc_processes_{uuid.uuid4().hex[:8]}(T x, T y) {{ return x * y - T(7); }}"
    env = dict(os.environ, JITER_MAGIC_CACHE_DIR=str(root), PYTHONPATH=REPO, JITER_MAGIC_CACHE_LOCK_TIMEOUT="300")
    env.pop("JITER_MAGIC_DISK_CACHE", None)
    children = [subprocess.Popen([sys.executable, "-c", RACE, str(go), code], env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        go.touch()  # all at once
        reports = []
        for child in children:
            out, err = child.communicate(timeout=300)
            assert child.returncode == 0, err[-500:]
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    assert all(r["ok"] for r in reports), reports
    assert sum(r["compiles"] for r in reports) == 1, reports
    assert sorted(r["disk_hits"] for r in reports) == [0] + [1] * 7, reports
    good_call_works()
