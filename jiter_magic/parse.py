"""Read a code string into a `Functor`: the entry function's name, template and parameters.

A small tokenizer, not a regex: it skips comments, string and character literals and
preprocessor lines, balances brackets, and treats the last top-level function
definition as the entry point, so helpers, structs, namespaces and qualifiers
(`__device__`, `inline`, `static`, multi-token return types) are all accepted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ArgumentTypeError, ParseError

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<pp>\#(?:\\\n|[^\n])*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<punct>::|->|&&|\|\||<<=|>>=|[-+*/%&|^!=<>]=|\+\+|--|.)
    """,
    re.VERBOSE | re.DOTALL,
)

# Words that may precede a return type and are not part of it.
_QUALIFIERS = frozenset(
    {"__device__", "__host__", "__forceinline__", "__noinline__", "inline", "static",
     "constexpr", "extern", "__inline__"}
)
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    line: int  # 1-based line in the code string


@dataclass(frozen=True)
class Parameter:
    """One parameter of the entry function, as declared."""

    name: str
    type: str
    is_reference: bool  # a non-const `T& out`: an output of the multi-output form

    def __str__(self) -> str:
        return f"{self.type} {self.name}"


@dataclass(frozen=True)
class Functor:
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


def tokenize(code: str) -> list[Token]:
    """Split C++ source into tokens, dropping white space, comments and preprocessor lines."""
    tokens: list[Token] = []
    line = 1
    for match in _TOKEN.finditer(code):
        kind = match.lastgroup or "punct"
        text = match.group()
        if kind not in ("ws", "comment", "pp"):
            tokens.append(Token(kind, text, line))
        line += text.count("\n")
    return tokens


def _match_bracket(tokens: list[Token], start: int) -> int:
    """Index of the bracket closing the one at `start` (round, square or curly)."""
    stack = []
    for index in range(start, len(tokens)):
        text = tokens[index].text
        if text in _OPEN:
            stack.append(_OPEN[text])
        elif text in _CLOSE:
            if not stack or stack.pop() != text:
                raise ParseError(f"unbalanced '{text}' on line {tokens[index].line} of the code string")
            if not stack:
                return index
    raise ParseError(f"'{tokens[start].text}' on line {tokens[start].line} of the code string is never closed")


def _match_angle(tokens: list[Token], start: int) -> int:
    """Index of the '>' closing a template parameter list that opens at `start`."""
    depth = 0
    index = start
    while index < len(tokens):
        text = tokens[index].text
        if text in ("(", "[", "{"):
            index = _match_bracket(tokens, index)
        elif text == "<":
            depth += 1
        elif text in (">", ">>"):
            depth -= len(text)
            if depth <= 0:
                return index
        index += 1
    raise ParseError(f"'template <' on line {tokens[start].line} of the code string is never closed")


def _split_commas(tokens: list[Token]) -> list[list[Token]]:
    """Split a token list on commas not nested in brackets; angle brackets count only before a
    default value's '=', where '<' and '>' are comparisons."""
    parts: list[list[Token]] = [[]]
    depth = angles = 0
    in_default = False
    for token in tokens:
        text = token.text
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
        elif not in_default and text == "<":
            angles += 1
        elif not in_default and text in (">", ">>"):
            angles = max(0, angles - len(text))
        elif text == "=" and depth == 0 and angles == 0:
            in_default = True
        if text == "," and depth == 0 and angles == 0:
            parts.append([])
            in_default = False
        else:
            parts[-1].append(token)
    return [part for part in parts if part]


def _join(tokens: list[Token]) -> str:
    out = ""
    for token in tokens:
        glue = out and (out[-1].isalnum() or out[-1] == "_") and (token.text[0].isalnum() or token.text[0] == "_")
        out += (" " if glue else "") + token.text
    return out


def _template_params(tokens: list[Token]) -> tuple[str, ...]:
    return tuple(_join(part) for part in _split_commas(tokens))


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
            f"parameter '{_join(tokens)}' of '{function}' (line {tokens[0].line}) needs a type and a name, "
            "for example 'T x'"
        )
    type_tokens = tokens[:-1]
    is_reference = any(t.text in ("&", "&&") for t in type_tokens) and not any(t.text == "const" for t in type_tokens)
    return Parameter(name=tokens[-1].text, type=_join(type_tokens), is_reference=is_reference)


@dataclass(frozen=True)
class _Definition:
    name: str
    template: tuple[str, ...] | None
    return_type: list[Token]
    params: list[Token]
    line: int


def _definition(head: list[Token]) -> _Definition | None:
    """Read `[template <...>] quals RET NAME (PARAMS) [const]` from the tokens before a '{'."""
    template = None
    if head and head[0].text == "template":
        if len(head) < 2 or head[1].text != "<":
            return None
        close = _match_angle(head, 1)
        template = _template_params(head[2:close])
        head = head[close + 1:]
    trailing: list[Token] = []
    for index in range(len(head) - 1, 0, -1):
        if head[index].text == "->" and head[index - 1].text == ")":
            head, trailing = head[:index], head[index + 1:]
            break
    while head and head[-1].text in ("const", "noexcept", "override"):
        head = head[:-1]
    if not head or head[-1].text != ")":
        return None
    depth, open_index = 0, None
    for index in range(len(head) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(head[index].text, 0)
        if depth == 0:
            open_index = index
            break
    if open_index is None or open_index == 0 or head[open_index - 1].kind != "ident":
        return None
    name = head[open_index - 1]
    return_type = [t for t in head[:open_index - 1] if t.text not in _QUALIFIERS]
    if trailing and [t.text for t in return_type] == ["auto"]:
        return_type = trailing
    if not return_type or any(t.text in (";", "=", "namespace", "struct", "class") for t in return_type):
        return None
    return _Definition(name.text, template, return_type, head[open_index + 1:-1], name.line)


def _definitions(tokens: list[Token]) -> list[_Definition]:
    """Every top-level function definition, in order; braces of other top-level items are skipped."""
    found: list[_Definition] = []
    start = index = 0
    while index < len(tokens):
        text = tokens[index].text
        if text == ";":
            start = index + 1
        elif text == "{":
            head = tokens[start:index]
            close = _match_bracket(tokens, index)
            # a namespace, struct or class body holds helpers, never the entry point
            definition = _definition(head)
            if definition is not None:
                found.append(definition)
            index = close
            start = close + 1
        elif text in ("(", "["):
            index = _match_bracket(tokens, index)
        elif text in (")", "]", "}"):
            raise ParseError(f"unbalanced '{text}' on line {tokens[index].line} of the code string")
        index += 1
    return found


def parse_functor(code: str) -> Functor:
    """Parse a jiterator code string; the last top-level function definition is the entry point."""
    if not isinstance(code, str):
        raise ArgumentTypeError(f"code_string must be a str of C++ source, got {type(code).__name__}")
    definitions = _definitions(tokenize(code))
    if not definitions:
        excerpt = code.strip()
        excerpt = excerpt if len(excerpt) <= 120 else excerpt[:117] + "..."
        raise ParseError(
            "the code string holds no C++ function definition; expected something like "
            "'template <typename T> T my_kernel(T x, T y) { return x + y; }', got: "
            f"{excerpt!r}"
        )
    entry = definitions[-1]
    parts = _split_commas(entry.params)
    if len(parts) == 1 and [t.text for t in parts[0]] == ["void"]:
        parts = []
    type_params = frozenset(p.split()[-1] for p in (entry.template or ()) if p.split()[0] in ("typename", "class"))
    params = [_parameter(part, entry.name, type_params) for part in parts]
    names = [p.name for p in params]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ParseError(f"'{entry.name}' declares parameter {duplicated[0]!r} twice")
    return Functor(
        code=code,
        name=entry.name,
        template_params=entry.template or (),
        is_template=entry.template is not None,
        return_type=_join(entry.return_type),
        parameters=tuple(params),
        helper_names=tuple(d.name for d in definitions[:-1]),
        line=entry.line,
    )
