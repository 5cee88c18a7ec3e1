"""Read a code string into a `Functor`: the entry function's name, template and parameters.

A small tokenizer (parse_tokens.py), not a regex: it skips comments, string and character
literals and preprocessor lines, balances brackets, and treats the last top-level function
definition as the entry point, so helpers, structs, namespaces and qualifiers (`__device__`,
`inline`, `static`, attributes, multi-token return types) are all accepted. Each definition's
declarator is read and checked in parse_decl.py: a return type that names two types
(`T my _kernel(`) is refused, as torch refuses it, instead of silently taking `_kernel`.
"""
from __future__ import annotations

from typing import NamedTuple

from jiter_magic.errors import ArgumentTypeError, ParseError
from jiter_magic.frontend.declarations import Definition, describe, read_definition, show
from jiter_magic.frontend.tokens import (
    Token,
    defined_macros,
    join,
    macros_with_braces,
    match_bracket,
    split_commas,
    tokenize,
)

__all__ = ["Functor", "Parameter", "Token", "parse_definitions", "parse_functor", "tokenize"]

EXAMPLE = "`template <typename T> T my_kernel(T x, T y) { return x + y; }`"


class Parameter(NamedTuple):
    """One parameter of the entry function, as declared."""

    name: str
    type: str
    is_reference: bool  # a non-const `T& out`: an output of the multi-output form

    def __str__(self) -> str:
        return f"{self.type} {self.name}"


class Functor(NamedTuple):
    """What the kernel generator needs to know about the user's code string."""

    code: str
    name: str
    template_params: tuple[str, ...]
    is_template: bool
    return_type: str
    parameters: tuple[Parameter, ...]
    helper_names: tuple[str, ...]
    line: int  # line of the entry function's name

    @property
    def returns_value(self) -> bool:
        return self.return_type not in ("void", "")

    @property
    def signature(self) -> str:
        head = f"template <{', '.join(self.template_params)}> " if self.is_template else ""
        params = ", ".join(str(p) for p in self.parameters)
        return f"{head}{self.return_type} {self.name}({params})"


_TYPE_WORDS = frozenset({"const", "volatile", "unsigned", "signed", "int", "char", "short", "long", "float",
                         "double", "bool", "void", "auto", "typename", "struct", "class"})


def _parameter(tokens: list[Token], function: str, type_params: frozenset[str]) -> Parameter:
    for index, token in enumerate(tokens):  # drop a default value
        if token.text == "=":
            tokens = tokens[:index]
            break
    names = [t for t in tokens if t.kind == "ident"]
    last = tokens[-1].text if tokens else ""
    if (len(tokens) < 2 or tokens[-1].kind != "ident" or len(names) < 2
            or last in _TYPE_WORDS or last in type_params):
        raise ParseError(
            f"parameter '{join(tokens)}' of '{function}' (line {tokens[0].line}) needs a type and a name, "
            "for example 'T x'"
        )
    type_tokens = tokens[:-1]
    is_reference = any(t.text in ("&", "&&") for t in type_tokens) and not any(t.text == "const" for t in type_tokens)
    return Parameter(name=tokens[-1].text, type=join(type_tokens), is_reference=is_reference)


def _read(head: list[Token], code: str, macros: frozenset[str]) -> Definition | None:
    """read_definition, its error followed by the source lines of the head (the last three), as a
    compiler shows them: the message names the problem, the lines show where."""
    try:
        return read_definition(head, macros)
    except ParseError as exc:
        lines = code.split("\n")
        first = max(head[0].line, head[-1].line - 2)
        shown = "".join(f"\n  line {n}: {lines[n - 1].strip()}" for n in range(first, head[-1].line + 1))
        raise ParseError(f"{exc}{shown}") from None


# A top-level item that is not a function definition: its tokens, whether it has a `{ ... }` body,
# and how many definitions come before it.
Other = tuple[list[Token], bool, int]


def _scan(code: str) -> tuple[list[Definition], list[Other]]:
    """Every top-level function definition, in order, and the other top-level items, for the error
    when there is none; a namespace, struct or class body holds helpers, never the entry point, so
    it is skipped whole."""
    tokens, macros = tokenize(code), defined_macros(code)
    found: list[Definition] = []
    others: list[Other] = []
    start = index = 0
    while index < len(tokens):
        text = tokens[index].text
        if text == ";":
            if index > start:
                others.append((tokens[start:index], False, len(found)))
            start = index + 1
        elif text == "{":
            head = tokens[start:index]
            definition = _read(head, code, macros) if head else None
            if definition is not None:
                found.append(definition)
            else:
                others.append((head, True, len(found)))
            index = match_bracket(tokens, index)
            start = index + 1
        elif text in ("(", "["):
            index = match_bracket(tokens, index)
        elif text in (")", "]", "}"):
            raise ParseError(f"unbalanced '{text}' on line {tokens[index].line} of the code string")
        index += 1
    if start < len(tokens):
        others.append((tokens[start:], False, len(found)))
    return found, others


def _invokes(item: list[Token], macros: frozenset[str]) -> str | None:
    """The macro a top-level item invokes: one the code string defines, or, for an item that is
    just `NAME(...)` (no type: not a declaration), NAME, a macro from a header."""
    named = [t.text for t in item if t.kind == "ident" and t.text in macros]
    if named:
        return named[0]
    bare = len(item) >= 3 and item[0].kind == "ident" and item[1].text == "("
    return item[0].text if bare and match_bracket(item, 1) == len(item) - 1 else None


def _made_by_macro(code: str, definitions: int, others: list[Other]) -> ParseError | None:
    """The error for an entry function a macro makes. The scan reads the code before the
    preprocessor runs, so a macro invoked after the last written-out definition, one whose
    replacement has a `{` (or, where there is no definition, any `NAME(...)` standing alone),
    would otherwise give "no function definition" or the wrong entry point."""
    macros, defined = macros_with_braces(code), defined_macros(code)
    for item, _has_body, before in others:
        name = _invokes(item, macros) if before == definitions else None
        if name is None or (definitions and name not in macros):
            continue
        what = ("the macro" if name in defined else "what looks like a macro (from a header?)")
        return ParseError(
            f"the entry function must be a plain function (or function template) definition written out in "
            f"the code string, not made by a macro: `{show(item)}` (line {item[0].line}) invokes {what} "
            f"`{name}`, and jiter_magic reads the entry's name and parameters before the preprocessor runs. "
            f"Write the entry out, for example {EXAMPLE}; macros may still make helper functions before it"
        )
    return None


def _no_entry(code: str, others: list[Other]) -> ParseError:
    """The error for a code string without a function definition: what was expected, and what the
    string holds instead, so that a declaration, lambda or struct is named as the reason."""
    found = [describe(item, has_body) for item, has_body, _before in others]
    if not found:
        instead = "it is empty" if not code.strip() else "it holds only comments and preprocessor lines"
    else:
        instead = "found instead " + "; ".join(found[-3:])
    excerpt = code.strip()
    excerpt = excerpt if len(excerpt) <= 120 else excerpt[:117] + "..."
    return ParseError(
        f"the code string holds no C++ function definition: expected a function definition such as {EXAMPLE}; "
        f"the last top-level definition is the entry point. {instead[0].upper() + instead[1:]}. "
        f"The code string: {excerpt!r}"
    )


def _parameters(entry: Definition) -> tuple[Parameter, ...]:
    """The entry's parameters; `(void)` is none, and a name may be declared once."""
    parts = split_commas(entry.params)
    if len(parts) == 1 and [t.text for t in parts[0]] == ["void"]:
        parts = []
    type_params = frozenset(p.split()[-1] for p in (entry.template or ()) if p.split()[0] in ("typename", "class"))
    params = [_parameter(part, entry.name, type_params) for part in parts]
    names = [p.name for p in params]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ParseError(f"'{entry.name}' declares parameter {duplicated[0]!r} twice")
    return tuple(params)


def parse_functor(code: str) -> Functor:
    """Parse a jiterator code string; the last top-level function definition is the entry point."""
    if not isinstance(code, str):
        raise ArgumentTypeError(f"code_string must be a str of C++ source, got {type(code).__name__}")
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ParseError(f"the code string is not valid text: {exc.reason} at position {exc.start} "
                         f"({code[exc.start:exc.end]!r}); compilers read UTF-8") from None
    definitions, others = _scan(code)
    macro_made = _made_by_macro(code, len(definitions), others)
    if macro_made is not None:
        raise macro_made
    if not definitions:
        raise _no_entry(code, others)
    return _functor(code, definitions, len(definitions) - 1)


def _functor(code: str, definitions: list[Definition], index: int) -> Functor:
    """Definition `index` as a Functor; the definitions before it are its helpers."""
    entry = definitions[index]
    return Functor(
        code=code,
        name=entry.name,
        template_params=entry.template or (),
        is_template=entry.template is not None,
        return_type=join(entry.return_type),
        parameters=_parameters(entry),
        helper_names=tuple(d.name for d in definitions[:index]),
        line=entry.line,
    )


def parse_definitions(code: str) -> tuple[Functor, ...]:
    """Every top-level function definition of a code string as a Functor, in order: a reduction
    names several of them (map, combine, finalize) where an elementwise function has one entry."""
    parse_functor(code)  # the same checks and errors as an elementwise code string
    definitions, _others = _scan(code)
    return tuple(_functor(code, definitions, index) for index in range(len(definitions)))
