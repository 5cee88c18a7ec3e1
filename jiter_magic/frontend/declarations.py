"""Read one top-level item: a function definition's declarator, or a phrase naming what it is instead.

The entry point has the shape `[template <...>] <return type> <name>(<parameters>) <suffix> {`.
torch's regex demands a one-word return type, which refuses `unsigned int` or `c10::complex<T>`;
so instead of a regex the return type is checked the way C++ reads a decl-specifier sequence:
it names exactly one type, either one (qualified, templated) type name or a run of fundamental
keywords (`unsigned long long`), around any number of `const`/`*`/`&`. `T my _kernel(` names two
types (`T`, `my`): that is a typo in the name, refused here rather than left to the compiler.
"""
from __future__ import annotations

from typing import NamedTuple

from jiter_magic.errors import ParseError
from jiter_magic.frontend.tokens import Token, join, match_angle, match_bracket, split_commas

EXPECTED = "expected `<return type> <name>(<parameters>)`"
# Words before the return type that are not part of it.
QUALIFIERS = frozenset({"__device__", "__host__", "__global__", "__forceinline__", "__noinline__", "__inline__",
                        "inline", "static", "constexpr", "consteval", "extern", "JM_INLINE"})
_CV = frozenset({"const", "volatile", "__restrict__", "__restrict", "typename", "*", "&", "&&"})
_FUNDAMENTAL = frozenset({"void", "bool", "char", "wchar_t", "char8_t", "char16_t", "char32_t", "short", "int",
                          "long", "signed", "unsigned", "float", "double", "auto", "__int128"})
_TYPEOF = frozenset({"decltype", "__typeof__", "typeof"})
_ATTRIBUTES = frozenset({"__attribute__", "__declspec", "alignas", "__launch_bounds__"})
_SUFFIX = frozenset({"const", "volatile", "noexcept", "override", "final", "&", "&&"})
_SUFFIX_CALLS = frozenset({"noexcept", "throw"})
_NOT_FUNCTION = frozenset({"namespace", "struct", "class", "union", "enum", "typedef", "using", "=", ";"})


class Definition(NamedTuple):
    name: str
    template: tuple[str, ...] | None
    return_type: list[Token]
    params: list[Token]
    line: int


def strip_attributes(tokens: list[Token]) -> list[Token]:
    """Drop `[[...]]`, `__attribute__((...))` and the like: they say nothing about the signature,
    and may sit before the declaration, between its words or on a parameter."""
    out: list[Token] = []
    index = 0
    while index < len(tokens):
        text = tokens[index].text
        nxt = tokens[index + 1].text if index + 1 < len(tokens) else ""
        if (text, nxt) == ("[", "[") or (text in _ATTRIBUTES and nxt == "("):
            index = match_bracket(tokens, index + (text in _ATTRIBUTES)) + 1
        else:
            out.append(tokens[index])
            index += 1
    return out


def _opening(tokens: list[Token], close: int) -> int:
    """Index of the '(' matching the ')' at `close`, scanning backwards."""
    depth = 0
    for index in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(tokens[index].text, 0)
        if depth == 0:
            return index
    return -1


def _parameter_list(head: list[Token]) -> int | None:
    """Index of the '(' opening the parameter list: the last group once a suffix such as `const`,
    `noexcept`, `noexcept(true)` or `throw()` is peeled off the end; None if the head ends otherwise."""
    end = len(head)
    while end:
        text = head[end - 1].text
        if text in _SUFFIX:
            end -= 1
            continue
        if text != ")":
            return None
        open_index = _opening(head, end - 1)
        if open_index > 0 and head[open_index - 1].text in _SUFFIX_CALLS:
            end = open_index - 1
            continue
        return open_index
    return None


def _split_trailing(head: list[Token]) -> tuple[list[Token], list[Token] | None]:
    """Split `... -> TYPE` at the first `->` outside parentheses (one inside is a default value's)."""
    depth = 0
    for index, token in enumerate(head):
        depth += {"(": 1, ")": -1}.get(token.text, 0)
        if token.text == "->" and depth == 0:
            return head[:index], head[index + 1:]
    return head, None


def _type_name(tokens: list[Token], index: int) -> int:
    """Index past one possibly qualified, templated name starting at `index`: `::c10::complex<T>`
    and `T::template rebind<U>::type` are each one name."""
    texts = [t.text for t in tokens] + [""]
    kinds = [t.kind for t in tokens] + [""]
    while True:
        index += texts[index] == "::"
        index += texts[index] == "template"
        if kinds[index] != "ident":
            return index
        index += 1
        if texts[index] == "<":
            index = match_angle(tokens, index, "<") + 1
        if texts[index] != "::":
            return index


def _specifiers(tokens: list[Token]) -> list[tuple[int, int]] | str:
    """The type specifiers of `tokens` in order, as (start, end) spans: a qualified or templated
    name, a `decltype(...)`, a run of fundamental keywords; cv-qualifiers, `*` and `&` are skipped.
    A string names a token that cannot be in a type."""
    found: list[tuple[int, int]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        nxt = tokens[index + 1].text if index + 1 < len(tokens) else ""
        if token.text in _CV:
            end = index + 1
        elif token.text in _FUNDAMENTAL:
            end = index + 1
            if not any(tokens[start].text in _FUNDAMENTAL for start, _ in found):  # `unsigned const long`: one
                found.append((index, end))
        elif token.text in _TYPEOF and nxt == "(":
            end = match_bracket(tokens, index + 1) + 1
            found.append((index, end))
        elif token.kind == "ident" or token.text == "::":
            end = _type_name(tokens, index)
            found.append((index, end))
        else:
            return f"`{token.text}` cannot be part of a return type"
        index = end
    return found


def _type_problem(tokens: list[Token], name: str, macros: frozenset[str], type_params: frozenset[str]) -> str | None:
    """Why `tokens` do not name exactly one type, or None."""
    if not tokens:
        return f"nothing names a return type before `{name}`; is a space missing between the type and the name?"
    if any(t.text in macros for t in tokens):
        return None  # a macro: only the preprocessor knows what it stands for
    found = _specifiers(tokens)
    if isinstance(found, str):
        return found
    if not found:
        return f"`{join(tokens)}` qualifies a type but names none"
    if len(found) == 1:
        return None
    first, second = (show(tokens[start:end]) for start, end in found[:2])
    problem = f"`{first}` and `{second}` are two types where a return type names one"
    last = tokens[-1]  # a plain name right before the function's: likely one name split by a space
    if found[-1] == (len(tokens) - 1, len(tokens)) and last.text not in _FUNDAMENTAL | type_params:
        problem += f"; is `{last.text} {name}` meant to be one name?"
    return problem


def _return_type(prefix: list[Token], trailing: list[Token] | None, name: Token,
                 known: tuple[frozenset[str], frozenset[str]]) -> list[Token]:
    """The return type: the prefix less qualifiers, or the trailing type after `auto ... ->`;
    raises ParseError naming the problem when it is not one type. `known`: the macros, the
    template's type parameters."""
    kept = [t for i, t in enumerate(prefix)
            if t.text not in QUALIFIERS and not (t.kind == "string" and i and prefix[i - 1].text == "extern")]
    shown = (show([*kept, name]) + "(" + (f"...) -> {show(trailing)}" if trailing is not None else "")).rstrip()
    problem = _type_problem(kept, name.text, *known)
    if trailing is not None and problem is None:
        if [t.text for t in kept] != ["auto"]:
            problem = "a trailing return type `-> ...` needs `auto` before the name"
        else:
            kept = trailing
            problem = _type_problem(trailing, name.text, *known) if trailing else "nothing follows `->`"
    if problem:
        raise ParseError(f"malformed function definition on line {name.line} of the code string: {EXPECTED}, "
                         f"got `{shown}`: {problem}")
    return kept


def _outside_parentheses(tokens: list[Token]) -> set[str]:
    """Texts of the tokens not inside parentheses (a default value's '=' does not count)."""
    depth, out = 0, set()
    for token in tokens:
        depth += {"(": 1, ")": -1}.get(token.text, 0)
        if depth == 0:
            out.add(token.text)
    return out


def read_definition(head: list[Token], macros: frozenset[str]) -> Definition | None:
    """Read `[template <...>] quals RET NAME(PARAMS) [suffix] [-> RET]` from the tokens before a
    '{'; None when they are not a function's head (a struct, namespace, initializer, lambda)."""
    head = strip_attributes(head)
    template = None
    if head and head[0].text == "template":
        if len(head) < 2 or head[1].text != "<":
            return None
        close = match_angle(head, 1)
        template = tuple(join(part) for part in split_commas(head[2:close]))
        head = head[close + 1:]
    if _outside_parentheses(head) & _NOT_FUNCTION:
        return None
    head, trailing = _split_trailing(head)
    open_index = _parameter_list(head)
    if open_index and head[open_index - 1].kind == "number":
        raise ParseError(f"malformed function definition on line {head[open_index - 1].line} of the code string: "
                         f"{EXPECTED}, got `{head[open_index - 1].text}(`: a name cannot start with a digit")
    if not open_index or head[open_index - 1].kind != "ident":
        return None
    name = head[open_index - 1]
    type_params = frozenset(p.split()[-1] for p in template or () if p.split()[0] in ("typename", "class"))
    return_type = _return_type(head[:open_index - 1], trailing, name, (macros, type_params))
    close = match_bracket(head, open_index)
    return Definition(name.text, template, return_type, head[open_index + 1:close], name.line)


_TIGHT_BEFORE = frozenset({"::", "<", ">", ">>", "(", ")", "[", "]", ",", ";", "*", "&", "&&"})


def show(tokens: list[Token], limit: int = 60) -> str:
    """Tokens as a reader would write them (`template <typename T> T* f(T x, T y)`), cut to a short line."""
    text = ""
    for index, token in enumerate(tokens):
        tight = text.endswith(("::", "<", "(", "[")) or token.text in _TIGHT_BEFORE and not text.endswith("template")
        if token.text == "[" and index:
            tight = tokens[index - 1].kind == "ident"
        text += token.text if not text or tight else " " + token.text
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe(item: list[Token], has_body: bool) -> str:
    """A short phrase for a top-level item that is not a function definition, for the error that
    says no entry point was found."""
    texts = [t.text for t in item]
    where = f" (line {item[0].line})" if item else ""
    for keyword in ("namespace", "enum", "union", "struct", "class"):
        if keyword in texts:
            names = [t.text for t in item[texts.index(keyword) + 1:] if t.kind == "ident" and t.text != "class"]
            named = f" `{names[0]}`" if names else ""
            article = "an" if keyword[0] in "aeiou" else "a"
            return f"{article} {keyword}{named}{where}, whose functions cannot be the entry point"
    if "=" in texts and texts[texts.index("=") + 1:][:1] == ["["] and has_body:
        return f"a lambda `{show(item)} {{ ... }}`{where}; the entry point must be a named function"
    if "(" in texts and "=" not in texts[:texts.index("(")] and not has_body:
        return f"a declaration without a `{{ ... }}` body, `{show(item)};`{where}"
    if "=" in texts:
        return f"a variable `{show(item[:texts.index('=')])}`{where}"
    return f"`{show(item)}`{where}"
