"""parse_functor: the code string -> Functor (entry name, template, parameters, helpers, lines)."""
from __future__ import annotations

import pytest

from jiter_magic.errors import JiterError, ParseError
from jiter_magic.frontend.parse import Functor, Parameter, parse_functor, tokenize

SEED_AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
SEED_HELPER = (
    "template <typename T> T util_fn(T x, T y) { return ::sin(x) + ::cos(y); }"
    "template <typename T> T my_kernel(T x, T y, T val) { return ::min(val, util_fn(x, y)); }"
)
SEED_GELU = "template <typename T> T my_gelu(T a) { return a > 0 ? a : 0; }"


def params(functor: Functor) -> list[tuple[str, str, bool]]:
    return [(p.name, p.type, p.is_reference) for p in functor.parameters]


# --------------------------------------------------------------------------- the seed examples


def test_seed_axpy():
    f = parse_functor(SEED_AXPY)
    assert f.code == SEED_AXPY
    assert f.name == "my_kernel"
    assert f.is_template is True
    assert f.template_params == ("typename T",)
    assert f.return_type == "T"
    assert f.returns_value is True
    assert params(f) == [("x", "T", False), ("y", "T", False), ("alpha", "T", False)]
    assert f.helper_names == ()
    assert f.line == 1
    assert f.signature == "template <typename T> T my_kernel(T x, T y, T alpha)"


def test_seed_helper_before_entry():
    f = parse_functor(SEED_HELPER)
    assert f.name == "my_kernel"
    assert f.helper_names == ("util_fn",)
    assert params(f) == [("x", "T", False), ("y", "T", False), ("val", "T", False)]
    assert f.return_type == "T"
    assert f.line == 1


def test_seed_gelu_ternary_with_angle_brackets_in_body():
    f = parse_functor(SEED_GELU)
    assert f.name == "my_gelu"
    assert params(f) == [("a", "T", False)]
    assert f.template_params == ("typename T",)
    assert f.helper_names == ()


def test_functor_is_frozen_and_comparable():
    a, b = parse_functor(SEED_AXPY), parse_functor(SEED_AXPY)
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.name = "other"  # type: ignore[misc]
    assert str(a.parameters[2]) == "T alpha"
    assert isinstance(a.parameters[0], Parameter)


# --------------------------------------------------------------------------- what the tokenizer skips


def test_comments_with_braces_are_skipped_and_lines_counted():
    code = (
        "// a line comment with { an open brace\n"
        "/* a block comment { } }} spanning\n"
        "   two lines */\n"
        "template <typename T> T f(T x /* inline } */, T y) { // }\n"
        "  return x + y; /* { */\n"
        "}\n"
    )
    f = parse_functor(code)
    assert f.name == "f"
    assert params(f) == [("x", "T", False), ("y", "T", False)]
    assert f.line == 4


def test_define_lines_and_continuations_are_skipped():
    code = (
        "#define SQ(x) ((x) * (x))\n"
        "#define OPEN \\\n"
        "  {\n"
        "#include <cuda_fp16.h>\n"
        "template <typename T> T sq(T x) { return SQ(x); }\n"
    )
    f = parse_functor(code)
    assert f.name == "sq"
    assert params(f) == [("x", "T", False)]
    assert f.line == 5


@pytest.mark.parametrize("ending", ["\\\n", "\\  \n", "\\\r\n"])
def test_a_line_comment_ending_in_a_backslash_swallows_the_next_line(ending):
    """The compiler splices the next line into the comment, so a function there is not the entry."""
    code = f"// a note {ending}template <typename T> T hidden(T x) {{ return x; }}\ntemplate <typename T> T seen(T x) {{ return x; }}\n"
    f = parse_functor(code)
    assert f.name == "seen"
    assert f.line == 3


def test_string_and_char_literals_with_braces():
    code = (
        "template <typename T> T f(T x) {\n"
        '  const char* s = "}{ \\" }";\n'
        "  char c = '}'; char d = '\\'';\n"
        "  return x;\n"
        "}"
    )
    f = parse_functor(code)
    assert f.name == "f"
    assert params(f) == [("x", "T", False)]


def test_tokenize_drops_whitespace_comments_and_preprocessor():
    tokens = tokenize("#define A 1\n// c\nT f(x) /* b */ { return 'x'; }")
    assert [t.text for t in tokens] == ["T", "f", "(", "x", ")", "{", "return", "'x'", ";", "}"]
    assert [t.kind for t in tokens][:3] == ["ident", "ident", "punct"]
    assert tokens[0].line == 3
    assert tokens[-2].kind == "punct" and tokens[-3].kind == "string"


# --------------------------------------------------------------------------- qualifiers and return types


@pytest.mark.parametrize(
    "prefix",
    ["__device__", "__forceinline__", "inline", "static", "__device__ __forceinline__",
     "static __device__ inline", "__host__ __device__", "constexpr"],
)
def test_qualifiers_are_not_part_of_the_return_type(prefix):
    f = parse_functor(f"template <typename T> {prefix} T g(T x) {{ return x; }}")
    assert f.name == "g"
    assert f.return_type == "T"
    assert params(f) == [("x", "T", False)]


@pytest.mark.parametrize(
    "ret, expected",
    [("const T", "const T"), ("unsigned int", "unsigned int"), ("long long", "long long"),
     ("__device__ const T", "const T"), ("c10::complex<T>", "c10::complex<T>"), ("void", "void")],
)
def test_multi_token_return_types(ret, expected):
    f = parse_functor(f"template <typename T> {ret} g(T x, T& o) {{ o = x; }}")
    assert f.return_type == expected
    assert f.returns_value is (expected != "void")


def test_non_template_entry_and_helpers():
    code = (
        "static inline unsigned int bits(unsigned int v) { return v ^ (v >> 1); }\n"
        "__device__ float scale(float v) { return 2.0f * v; }\n"
        "__device__ unsigned int entry(unsigned int x, float s) { return bits(x) + scale(s); }\n"
    )
    f = parse_functor(code)
    assert f.name == "entry"
    assert f.is_template is False
    assert f.template_params == ()
    assert f.return_type == "unsigned int"
    assert params(f) == [("x", "unsigned int", False), ("s", "float", False)]
    assert f.helper_names == ("bits", "scale")
    assert f.line == 3
    assert f.signature == "unsigned int entry(unsigned int x, float s)"


def test_structs_namespaces_declarations_and_globals_before_the_entry():
    code = (
        "struct Pair { float a; float first() const { return a; } };\n"
        "namespace ns { template <typename T> T twice(T x) { return x + x; } }\n"
        "template <typename T> struct Box { T v; T get() { return v; } };\n"
        "template <typename T> T declared_only(T x);\n"
        "__device__ const float table[3] = {1.0f, 2.0f, 3.0f};\n"
        "template <typename T> T entry(T x) { return ns::twice(x) * table[1]; }\n"
    )
    f = parse_functor(code)
    assert f.name == "entry"
    assert f.line == 6
    assert params(f) == [("x", "T", False)]
    # only top-level functions are helpers: struct members, namespace bodies, declarations are not
    for not_helper in ("Pair", "first", "ns", "Box", "get", "declared_only", "table"):
        assert not_helper not in f.helper_names


def test_struct_after_the_entry_does_not_replace_it():
    f = parse_functor("template <typename T> T entry(T x) { return x; }\nstruct S { int a; };\n")
    assert f.name == "entry"
    assert f.helper_names == ()


def test_nested_braces_in_body():
    code = (
        "template <typename T> T f(T x) {\n"
        "  if (x > T(0)) { { for (int i = 0; i < 2; ++i) { x = x * x; } } }\n"
        "  else { x = -x; }\n"
        "  return [&]() { return x; }();\n"
        "}\n"
    )
    f = parse_functor(code)
    assert f.name == "f"
    assert params(f) == [("x", "T", False)]
    assert f.line == 1


def test_several_helpers_keep_their_order():
    code = (
        "template <typename T> T h1(T x) { return x; }\n"
        "template <typename T> T h2(T x) { return h1(x); }\n"
        "__device__ float h3(float x) { return x; }\n"
        "template <typename T> T h4(T x) { return h2(x); }\n"
        "template <typename T> T main_fn(T x, T y) { return h4(x) + h3(y); }\n"
    )
    f = parse_functor(code)
    assert f.name == "main_fn"
    assert f.helper_names == ("h1", "h2", "h3", "h4")
    assert f.line == 5


def test_entry_spread_over_lines_reports_line_of_name():
    f = parse_functor("\n\ntemplate <typename T>\nT\nmy_kernel(T x,\n  T y)\n{\n  return x;\n}\n")
    assert f.name == "my_kernel"
    assert f.line == 5
    assert params(f) == [("x", "T", False), ("y", "T", False)]


def test_template_parameter_lists():
    f = parse_functor("template <typename T, int N, typename U = float> T f(T x) { return x; }")
    assert f.template_params == ("typename T", "int N", "typename U=float")
    assert f.is_template is True
    f = parse_functor("template <class T> T f(T x) { return x; }")
    assert f.template_params == ("class T",)


# --------------------------------------------------------------------------- parameters


def test_default_parameter_values_are_dropped():
    f = parse_functor("template <typename T> T f(T x, T y = T(1), T z = 2, T w = min(1, 2)) { return x; }")
    assert params(f) == [("x", "T", False), ("y", "T", False), ("z", "T", False), ("w", "T", False)]


def test_reference_outputs_vs_const_reference_inputs():
    f = parse_functor(
        "template <typename T> void f(const T& a, T& out0, T &out1, const T &b, T const& c, T* p, T && r) { }"
    )
    assert f.return_type == "void"
    assert f.returns_value is False
    assert params(f) == [
        ("a", "const T&", False),
        ("out0", "T&", True),
        ("out1", "T&", True),
        ("b", "const T&", False),
        ("c", "T const&", False),
        ("p", "T*", False),
        ("r", "T&&", True),
    ]


def test_templated_parameter_types():
    f = parse_functor("template <typename T> T f(c10::complex<T> z, jm::vec<T, 4> v, T y) { return y; }")
    assert params(f) == [("z", "c10::complex<T>", False), ("v", "jm::vec<T,4>", False), ("y", "T", False)]


@pytest.mark.parametrize("empty", ["()", "(void)"])
def test_no_parameters(empty):
    f = parse_functor(f"template <typename T> T f{empty} {{ return T(1); }}")
    assert f.parameters == ()
    assert f.signature == "template <typename T> T f()"


def test_trailing_qualifiers_after_parameter_list():
    f = parse_functor("struct S { int f(int x) const noexcept { return x; } };\n__device__ int g(int x) noexcept { return x; }")
    assert f.name == "g"
    assert params(f) == [("x", "int", False)]


# --------------------------------------------------------------------------- malformed input


@pytest.mark.parametrize("code", ["", "   \n\t", "int x = 3;", "// only a comment {}\n", "#define F(x) { x }"])
def test_no_function_definition(code):
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    message = str(info.value)
    assert message.startswith(
        "the code string holds no C++ function definition: expected a function definition such as "
        "`template <typename T> T my_kernel(T x, T y) { return x + y; }`; "
        "the last top-level definition is the entry point. "
    )
    assert message.endswith(f"The code string: {code.strip()!r}")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, JiterError)


def test_no_function_long_excerpt_is_truncated():
    code = "int x = 3; " * 40
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    assert "int x = 3; int x = 3;" in str(info.value)
    assert "..." in str(info.value)


@pytest.mark.parametrize(
    "code, fragments",
    [
        ("template <typename T> T f(T x) { return x; ", ["'{'", "never closed", "line 1"]),
        ("template <typename T> T f(T x) { return x; }}", ["unbalanced '}'", "line 1"]),
        ("template <typename T> T f(T x) {\n  return (x;\n}", ["unbalanced '}'", "line 3"]),
        ("template <typename T> T f(T x)) { return x; }", ["unbalanced ')'"]),
        ("template <typename T> T f(T x { return x; }", ["'('", "never closed"]),
        ("template <typename T T f(T x) { return x; }", ["template <", "never closed"]),
        ("\n\ntemplate <typename T> T f(T x) { return x[0); }", ["unbalanced ')'", "line 3"]),
    ],
)
def test_unbalanced_brackets(code, fragments):
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "code, fragment",
    [
        ("template <typename T> T f(T) { return T(1); }", "parameter 'T'"),
        ("template <typename T> T f(T x, T&) { return x; }", "parameter 'T&'"),
        ("template <typename T> T f(T x, const T*) { return x; }", "parameter 'const T*'"),
    ],
)
def test_parameter_without_a_name(code, fragment):
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    message = str(info.value)
    assert fragment in message
    assert "'f'" in message
    assert "line 1" in message


@pytest.mark.parametrize("param", ["const T", "unsigned int"])
def test_parameter_without_a_name_two_word_type(param):
    with pytest.raises(ParseError) as info:
        parse_functor(f"template <typename T> T f({param}, T y) {{ return y; }}")
    assert param in str(info.value)


def test_duplicate_parameter_names():
    with pytest.raises(ParseError) as info:
        parse_functor("template <typename T> T f(T x, T x) { return x; }")
    assert "'x'" in str(info.value) and "twice" in str(info.value)


def test_code_must_be_a_string():
    with pytest.raises(TypeError) as info:
        parse_functor(b"template <typename T> T f(T x) { return x; }")  # type: ignore[arg-type]
    assert "bytes" in str(info.value)
    assert not isinstance(info.value, ParseError)


def test_default_value_with_less_than_keeps_following_parameters():
    f = parse_functor("template <typename T> T f(T x, T y = T(1) < T(2), T z = 3) { return x; }")
    assert [p.name for p in f.parameters] == ["x", "y", "z"]


def test_trailing_return_type():
    f = parse_functor("template <typename T> auto f(T x) -> T { return x; }")
    assert f.name == "f"
    assert [p.name for p in f.parameters] == ["x"]



# --------------------------------------------------------------------------- the declarator: `<return type> <name>(`

NOT_ONE_NAME = "malformed function definition on line {line} of the code string: expected `<return type> <name>(<parameters>)`, got "


@pytest.mark.parametrize(
    "code, got, problem",
    [
        # torch's test_invalid_function_name: a space inside the name must fail at creation
        ("template <typename T> T axpy _fn(T x, T y) { return x + y; }", "T axpy _fn(",
         "`T` and `axpy` are two types where a return type names one; is `axpy _fn` meant to be one name?"),
        ("float scale _by(float v) { return v; }", "float scale _by(",
         "`float` and `scale` are two types where a return type names one; is `scale _by` meant to be one name?"),
        ("template <typename T> __device__ const T* out _ptr(T x) { return x; }", "const T* out _ptr(",
         "`T` and `out` are two types where a return type names one; is `out _ptr` meant to be one name?"),
        ("template <typename T> c10::complex<T> z _fn(T x) { return x; }", "c10::complex<T> z _fn(",
         "`c10::complex<T>` and `z` are two types where a return type names one; is `z _fn` meant to be one name?"),
        # and the other torch case: no space at all, so nothing is left for the return type
        ("template <typename T> Taxpy_fn(T x) { return x; }", "Taxpy_fn(",
         "nothing names a return type before `Taxpy_fn`; is a space missing between the type and the name?"),
        ("__device__ inline half_fn(float x) { return x; }", "half_fn(",
         "nothing names a return type before `half_fn`; is a space missing between the type and the name?"),
        # a type parameter after a fundamental type is not a name typo: no hint
        ("template <typename T> unsigned T f(T x) { return x; }", "unsigned T f(",
         "`unsigned` and `T` are two types where a return type names one"),
        ("template <typename T> const f(T x) { return x; }", "const f(", "`const` qualifies a type but names none"),
        ("template <typename T> T, T f(T x) { return x; }", "T, T f(", "`,` cannot be part of a return type"),
        ("template <typename T> T f(T x) -> T { return x; }", "T f(...) -> T",
         "a trailing return type `-> ...` needs `auto` before the name"),
        ("template <typename T> auto f(T x) -> { return x; }", "auto f(...) ->", "nothing follows `->`"),
        ("template <typename T> T 2f(T x) { return x; }", "2f(", "a name cannot start with a digit"),
        ("template <typename T> T \u0663f(T x) { return x; }", "\u0663f(", "a name cannot start with a digit"),
    ],
)
def test_malformed_declarator_is_refused_with_the_rule(code, got, problem):
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    assert str(info.value) == f"{NOT_ONE_NAME.format(line=1)}`{got}`: {problem}\n  line 1: {code}"
    assert isinstance(info.value, ValueError)


def test_malformed_entry_after_a_helper_is_refused_not_replaced_by_the_helper():
    # without the check the helper would silently become the entry point
    code = "template <typename T> T helper(T x) { return x; }\ntemplate <typename T> T my _kernel(T x) { return x; }"
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    assert str(info.value).startswith(NOT_ONE_NAME.format(line=2) + "`T my _kernel(`")
    assert str(info.value).endswith("\n  line 2: template <typename T> T my _kernel(T x) { return x; }")


def test_malformed_declarator_over_several_lines_shows_them():
    code = "template <typename T>\nT\nmy _kernel(T x,\n  T y)\n{\n  return x;\n}\n"
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    assert str(info.value) == (
        NOT_ONE_NAME.format(line=3) + "`T my _kernel(`: `T` and `my` are two types where a return type names one; "
        "is `my _kernel` meant to be one name?\n  line 2: T\n  line 3: my _kernel(T x,\n  line 4: T y)"
    )


@pytest.mark.parametrize(
    "ret, expected",
    [("typename T::value_type", "typename T::value_type"),
     ("const typename std::remove_reference<T>::type&", "const typename std::remove_reference<T>::type&"),
     ("::c10::complex<T>", "::c10::complex<T>"), ("jm::vec<jm::vec<T, 2>>", "jm::vec<jm::vec<T,2>>"),
     ("unsigned long long int", "unsigned long long int"), ("long double", "long double"), ("unsigned const long", "unsigned const long"), ("T const", "T const"),
     ("static inline T", "T"), ("__host__ __device__ __forceinline__ T*", "T*"), ("decltype(auto)", "decltype(auto)"),
     ("T* __restrict__", "T*__restrict__"), ("volatile unsigned", "volatile unsigned")],
)
def test_one_type_in_many_tokens_is_a_return_type(ret, expected):
    f = parse_functor(f"template <typename T> {ret} g(T x) {{ return x; }}")
    assert (f.name, f.return_type, params(f)) == ("g", expected, [("x", "T", False)])


def test_a_return_type_spelled_with_a_macro_is_left_to_the_compiler():
    f = parse_functor("#define REAL float\n#define DEV __device__\nDEV REAL half_of(REAL x) { return x / 2; }")
    assert (f.name, f.return_type, f.line) == ("half_of", "DEV REAL", 3)
    assert params(f) == [("x", "REAL", False)]


# --------------------------------------------------------------------------- noexcept, throw(), attributes


@pytest.mark.parametrize(
    "code, return_type",
    [
        ("template <typename T> T f(T x, T y) noexcept { return x; }", "T"),
        ("template <typename T> T f(T x, T y) noexcept(true) { return x; }", "T"),
        ("template <typename T> T f(T x, T y) noexcept(sizeof(T) > 2) { return x; }", "T"),
        ("template <typename T> T f(T x, T y) throw() { return x; }", "T"),
        ("template <typename T> auto f(T x, T y) noexcept -> T { return x; }", "T"),
        ("template <typename T> constexpr auto f(T x, T y) noexcept(true) -> T { return x; }", "T"),
        ("template <typename T> auto f(T x, T y) -> decltype(x + y) { return x + y; }", "decltype(x+y)"),
        ("template <typename T> [[nodiscard]] T f(T x, T y) { return x; }", "T"),
        ("template <typename T> [[nodiscard, gnu::always_inline]] __device__ T f(T x, T y) { return x; }", "T"),
        ("template <typename T> __attribute__((always_inline)) inline T f(T x, T y) { return x; }", "T"),
        ("template <typename T> T f([[maybe_unused]] T x, T y) { return y; }", "T"),
        ("template <typename T> T f(T x, T y) noexcept [[deprecated]] { return x; }", "T"),
    ],
)
def test_noexcept_throw_and_attributes(code, return_type):
    f = parse_functor(code)
    assert (f.name, f.return_type, f.is_template, f.line) == ("f", return_type, True, 1)
    assert params(f) == [("x", "T", False), ("y", "T", False)]
    assert f.signature == f"template <typename T> {return_type} f(T x, T y)"


def test_attribute_before_a_non_template_declaration_and_extern_c():
    f = parse_functor('[[nodiscard]] __device__ float twice(float x) { return 2 * x; }\n'
                      'extern "C" __device__ float entry(float x) noexcept { return twice(x); }')
    assert (f.name, f.return_type, f.is_template, f.helper_names, f.line) == ("entry", "float", False, ("twice",), 2)
    assert f.signature == "float entry(float x)"


# --------------------------------------------------------------------------- Unicode identifiers


def test_unicode_identifiers():
    f = parse_functor("template <typename T> T größe(T maß, T α, T 値) { return maß * α + 値; }")
    assert (f.name, f.return_type, f.line) == ("größe", "T", 1)
    assert params(f) == [("maß", "T", False), ("α", "T", False), ("値", "T", False)]
    assert f.signature == "template <typename T> T größe(T maß, T α, T 値)"


def test_unicode_identifier_tokens():
    decomposed = "gro\u0308sse"  # 'o' and a combining diaeresis: a mark, not a \w character
    tokens = tokenize(f"T {decomposed}(T _λ2, T x٣) {{ return _λ2; }}")
    assert [(t.kind, t.text) for t in tokens[:9]] == [
        ("ident", "T"), ("ident", decomposed), ("punct", "("), ("ident", "T"), ("ident", "_λ2"), ("punct", ","),
        ("ident", "T"), ("ident", "x٣"), ("punct", ")"),
    ]
    # a digit, Unicode or not, never starts a name
    assert [t.kind for t in tokenize("٣x 3x")] == ["number", "number"]


def test_unicode_names_in_helpers_and_lines():
    f = parse_functor("__device__ float ÿ(float v) { return v; }\n\ntemplate <typename T> T Ωmega(T x) { return ÿ(x); }")
    assert (f.name, f.helper_names, f.line) == ("Ωmega", ("ÿ",), 3)


# --------------------------------------------------------------------------- what is found instead of an entry point

NO_ENTRY = (
    "the code string holds no C++ function definition: expected a function definition such as "
    "`template <typename T> T my_kernel(T x, T y) { return x + y; }`; the last top-level definition is the entry "
    "point. "
)


@pytest.mark.parametrize(
    "code, instead",
    [
        ("", "It is empty"),
        ("// nothing here\n#define X 1\n", "It holds only comments and preprocessor lines"),
        ("template <typename T> T f(T x);",
         "Found instead a declaration without a `{ ... }` body, `template <typename T> T f(T x);` (line 1)"),
        ("template <typename T> T f(T x) return x;",
         "Found instead a declaration without a `{ ... }` body, `template <typename T> T f(T x) return x;` (line 1)"),
        ("auto f = [](float x) { return x; };",
         "Found instead a lambda `auto f = [](float x) { ... }` (line 1); the entry point must be a named function"),
        ("\nstruct Pair { float a; float first() const { return a; } };",
         "Found instead a struct `Pair` (line 2), whose functions cannot be the entry point"),
        ("namespace ns { float g(float x) { return x; } }",
         "Found instead a namespace `ns` (line 1), whose functions cannot be the entry point"),
        ("enum class Mode { A, B };", "Found instead an enum `Mode` (line 1), whose functions cannot be the entry point"),
        ("__device__ const float table[2] = {1.0f, 2.0f};", "Found instead a variable `__device__ const float table[2]` (line 1)"),
        ("just some words", "Found instead `just some words` (line 1)"),
        ("int x = 3;\nstruct S { int a; };\ntemplate <typename T> T g(T x);",
         "Found instead a variable `int x` (line 1); a struct `S` (line 2), whose functions cannot be the entry point; "
         "a declaration without a `{ ... }` body, `template <typename T> T g(T x);` (line 3)"),
    ],
)
def test_no_entry_point_says_what_was_expected_and_found(code, instead):
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    assert str(info.value) == f"{NO_ENTRY}{instead}. The code string: {code.strip()!r}"


def test_no_entry_point_lists_the_last_three_items():
    code = "int a = 1; int b = 2; int c = 3; int d = 4;"
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    assert "Found instead a variable `int b` (line 1); a variable `int c` (line 1); a variable `int d` (line 1)." in str(
        info.value)
    assert "`int a`" not in str(info.value).split("The code string")[0]


# --------------------------------------------------------------------------- an entry function a macro makes

MACRO_MADE = ("the entry function must be a plain function (or function template) definition written out in the code "
              "string, not made by a macro: ")
MACRO_ADVICE = (", and jiter_magic reads the entry's name and parameters before the preprocessor runs. Write the entry "
                "out, for example `template <typename T> T my_kernel(T x, T y) { return x + y; }`; macros may still "
                "make helper functions before it")


@pytest.mark.parametrize(
    "code, invocation",
    [
        ("#define MAKE(n) template <typename T> T n(T x) { return x; }\nMAKE(my_fn)",
         "`MAKE(my_fn)` (line 2) invokes the macro `MAKE`"),
        ("#define MAKE(n) template <typename T> T n(T x) { return x; }\nMAKE(my_fn);",
         "`MAKE(my_fn)` (line 2) invokes the macro `MAKE`"),
        ("#define ENTRY \\\n  template <typename T> T spliced(T x) { return x; }\n\nENTRY",
         "`ENTRY` (line 4) invokes the macro `ENTRY`"),
        ("#define BODY { return x; }\ntemplate <typename T> T f(T x) BODY",
         "`template <typename T> T f(T x) BODY` (line 2) invokes the macro `BODY`"),
        ('#include "my_macros.h"\nMAKE_KERNEL(my_fn)',
         "`MAKE_KERNEL(my_fn)` (line 2) invokes what looks like a macro (from a header?) `MAKE_KERNEL`"),
    ],
)
def test_an_entry_made_by_a_macro_is_refused_saying_so(code, invocation):
    with pytest.raises(ParseError) as info:
        parse_functor(code)
    assert str(info.value) == f"{MACRO_MADE}{invocation}{MACRO_ADVICE}"
    assert isinstance(info.value, ValueError) and isinstance(info.value, JiterError)


def test_a_macro_made_function_after_a_written_helper_is_not_taken_for_the_helper():
    """Without the check the helper, the last definition the scan sees, would become the entry."""
    code = ("template <typename T> T helper(T x) { return x + T(1); }\n"
            "#define MAKE(n) template <typename T> T n(T x) { return helper(x); }\n"
            "MAKE(my_fn)")
    with pytest.raises(ParseError, match=r"^the entry function must be a plain .* `MAKE\(my_fn\)` \(line 3\) invokes "
                                         r"the macro `MAKE`"):
        parse_functor(code)


@pytest.mark.parametrize(
    "code",
    [
        # macros that make helpers before a written-out entry, and ones without braces after it
        "#define MAKE(n) template <typename T> T n(T x) { return x; }\nMAKE(helper)\n"
        "template <typename T> T entry(T x) { return helper(x); }",
        "#define SCALE 3\ntemplate <typename T> T entry(T x) { return x * SCALE; }\nstatic const int unused = SCALE;",
        "template <typename T> T entry(T x) { return x; }\nDECLARE_SOMETHING(entry)",
    ],
)
def test_macros_that_do_not_make_the_entry_are_accepted(code):
    functor = parse_functor(code)
    assert functor.name == "entry" and params(functor) == [("x", "T", False)]
