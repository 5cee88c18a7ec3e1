"""Record classes (`@record`, `@record(frozen=True)`): dataclasses that cost a new process less to make.

`dataclasses.dataclass` compiles each generated method from source, about a millisecond a class:
with the package's twenty records that was half of `import jiter_magic`, which a new process pays
before its first result. `record` compiles nothing: `__init__`, `__repr__`, `__eq__`, `__hash__`
and, for frozen records, the refusal to assign, are closures over the fields, comparing and
hashing through `operator.attrgetter`'s tuples; the class's `__signature__` (what `help` and
`inspect.signature` show) names the fields, made only when asked. It covers
what this package uses: defaults, `field(default_factory=..., repr=..., compare=...)`, `eq=False`,
`repr=False`, `__post_init__`, and records built on records. Type checkers see a dataclass
(PEP 681). `replace` and `as_dict` stand in for their `dataclasses` namesakes.

To a user a record still is a dataclass: `dataclasses.is_dataclass`, `fields`, `asdict` and
`replace` work on it (its `__dataclass_fields__` are made the first time one of them asks), and
assigning to a frozen one raises `dataclasses.FrozenInstanceError`. Both import `dataclasses` only
then: it imports `inspect`, 10 ms of a new process that has not imported torch.
"""
from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple  # type checkers see typing's; at run time, the one below

    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda decorator: decorator

T = TypeVar("T")
FIELDS = "__record_fields__"


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def _frozen_error(kind: str, what: str, name: str) -> AttributeError:
    """`dataclasses.FrozenInstanceError`, what code written for the dataclasses these were catches."""
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot {what} field {name!r} of a frozen {kind}")


class Field:
    """One field: its name, default or default factory, and whether repr and == include it."""

    __slots__ = ("name", "type", "default", "default_factory", "repr", "compare")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING, repr: bool = True,
                 compare: bool = True) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("a field takes a default or a default_factory, not both")
        self.name, self.type = "", ""
        self.default, self.default_factory, self.repr, self.compare = default, default_factory, repr, compare

    def __repr__(self) -> str:
        return f"Field({self.name!r})"


def field(*, default: Any = MISSING, default_factory: Callable[[], Any] | Any = MISSING, repr: bool = True,
          compare: bool = True) -> Any:
    """A field's options, as `dataclasses.field` takes them (the subset records support)."""
    return Field(default, default_factory, repr, compare)


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, frozen: bool = ..., eq: bool = ..., repr: bool = ...) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field, Field))
def record(cls: type[T] | None = None, /, *, frozen: bool = False, eq: bool = True,
           repr: bool = True) -> Any:
    """Make `cls` a record: like `@dataclass(frozen=..., eq=..., repr=...)`."""
    def make(target: type[T]) -> type[T]:
        return _make(target, frozen, eq, repr)

    return make if cls is None else make(cls)


def fields_of(obj: object) -> tuple[Field, ...]:
    """A record's (or record class's) fields, in order."""
    found = getattr(obj, FIELDS, None)
    if found is None:
        raise TypeError(f"{type(obj).__name__} is not a record")
    return found


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record `obj` with `changes` made, through its `__init__`."""
    names = [f.name for f in fields_of(obj)]
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field(s) {', '.join(map(str, unknown))}")
    values = {name: changes[name] if name in changes else getattr(obj, name) for name in names}
    return type(obj)(**values)


def as_dict(obj: object) -> dict[str, Any]:
    """The record's fields as a dict (values as they are; records here hold no nested records)."""
    return {f.name: getattr(obj, f.name) for f in fields_of(obj)}


def _is_class_var(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _own_annotations(cls: type) -> dict[str, Any]:
    """The class's own annotations, as text where they were written under `from __future__ import
    annotations`; Python 3.14 keeps others behind `__annotate__`, which `annotationlib` reads."""
    if "__annotations__" in cls.__dict__:
        return cls.__dict__["__annotations__"]
    try:
        import annotationlib  # Python 3.14+
    except ImportError:
        return {}
    return annotationlib.get_annotations(cls, format=annotationlib.Format.STRING)


def _collect(cls: type) -> tuple[Field, ...]:
    inherited: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in getattr(base, FIELDS, ()):
            inherited[f.name] = f
    for name, annotation in _own_annotations(cls).items():
        if _is_class_var(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        if isinstance(f.default, (list, dict, set)):
            raise ValueError(f"{cls.__name__}.{name}: a mutable default; use field(default_factory=...)")
        f.name, f.type = name, annotation
        if f.default is MISSING and name in cls.__dict__:
            delattr(cls, name)  # a Field with no default leaves no class attribute
        elif f.default is not MISSING:
            setattr(cls, name, f.default)
        inherited[name] = f
    result = tuple(inherited.values())
    seen_default = False
    for f in result:
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        if seen_default and not has_default:
            raise TypeError(f"{cls.__name__}: field {f.name!r} without a default follows one with a default")
        seen_default = seen_default or has_default
    return result


def _init_of(cls: type, fields: tuple[Field, ...]) -> Callable[..., None]:
    """`__init__` without compiling anything (compiling one from source cost a new process 0.1-0.2 ms
    a record): all fields given by position fill the instance's `__dict__` in one step (past a
    frozen record's `__setattr__`); any other call is bound as Python binds a signature that names
    the fields, defaults and default factories filled in. The class's `__signature__` names them."""
    names = tuple(f.name for f in fields)
    count = len(names)
    post_init = hasattr(cls, "__post_init__")
    owner = cls.__qualname__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs or len(args) != count:
            args = _bound(owner, fields, args, kwargs)
        self.__dict__.update(zip(names, args))
        if post_init:
            self.__post_init__()
    return __init__


def _bound(owner: str, fields: tuple[Field, ...], args: tuple, kwargs: dict[str, Any]) -> tuple:
    """The values of a call that names fields or leaves some out, with the errors Python gives."""
    if len(args) > len(fields):
        raise TypeError(f"{owner}.__init__() takes {len(fields) + 1} positional arguments "
                        f"but {len(args) + 1} were given")
    for f in fields[:len(args)]:
        if f.name in kwargs:
            raise TypeError(f"{owner}.__init__() got multiple values for argument {f.name!r}")
    values = list(args)
    missing = []
    for f in fields[len(args):]:
        if f.name in kwargs:
            values.append(kwargs.pop(f.name))
        elif f.default is not MISSING:
            values.append(f.default)
        elif f.default_factory is not MISSING:
            values.append(f.default_factory())
        else:
            missing.append(f.name)
    if missing:
        raise TypeError(f"{owner}.__init__() missing {len(missing)} required argument(s): "
                        + ", ".join(map(repr, missing)))
    if kwargs:
        raise TypeError(f"{owner}.__init__() got an unexpected keyword argument {next(iter(kwargs))!r}")
    return tuple(values)


class _Signature:
    """A record class's `__signature__`, made when asked (`inspect.signature`, `help`): its fields
    as parameters, with their defaults (a default factory shows as `<factory>`, as for a dataclass)."""

    def __get__(self, instance: object, owner: type) -> Any:
        import inspect

        parameters = []
        for f in getattr(owner, FIELDS):
            default = f.default if f.default is not MISSING else \
                _Factory() if f.default_factory is not MISSING else inspect.Parameter.empty
            parameters.append(inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                default=default, annotation=f.type or inspect.Parameter.empty))
        return inspect.Signature(parameters, return_annotation=None)


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"


def _values_of(names: tuple[str, ...]) -> Callable[[object], tuple]:
    """The named attributes of an object as a tuple (attrgetter's C loop; it gives a bare value for one name)."""
    if not names:
        return lambda _: ()
    get = attrgetter(*names)
    return get if len(names) > 1 else lambda obj: (get(obj),)


def _methods(cls: type, fields: tuple[Field, ...], frozen: bool, eq: bool, repr: bool) -> dict[str, Any]:
    own = cls.__dict__
    made: dict[str, Any] = {"__init__": _init_of(cls, fields)}
    if repr and "__repr__" not in own:
        shown = tuple(f.name for f in fields if f.repr)

        def __repr__(self: object) -> str:
            return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"
        made["__repr__"] = __repr__
    compared = _values_of(tuple(f.name for f in fields if f.compare))
    if eq and "__eq__" not in own:
        def __eq__(self: object, other: object) -> Any:
            if other.__class__ is not self.__class__:
                return NotImplemented
            return compared(self) == compared(other)
        made["__eq__"] = __eq__
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if eq and not explicit_hash:
        if frozen:
            def __hash__(self: object) -> int:
                return hash(compared(self))
            made["__hash__"] = __hash__
        else:
            made["__hash__"] = None  # mutable and compared by value: unhashable, as a dataclass
    if frozen:
        kind = cls.__name__

        def __setattr__(self: object, name: str, value: object) -> None:
            raise _frozen_error(kind, "assign to", name)

        def __delattr__(self: object, name: str) -> None:
            raise _frozen_error(kind, "delete", name)
        made["__setattr__"], made["__delattr__"] = __setattr__, __delattr__
    return made


def _make(cls: type[T], frozen: bool, eq: bool, repr: bool) -> type[T]:
    fields = _collect(cls)
    for name, method in _methods(cls, fields, frozen, eq, repr).items():
        if method is not None:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            method.__module__ = cls.__module__
        setattr(cls, name, method)
    setattr(cls, FIELDS, fields)
    cls.__dataclass_fields__ = _DataclassFields()  # type: ignore[attr-defined]
    cls.__replace__ = replace  # type: ignore[attr-defined]  # copy.replace, Python 3.13+
    cls.__match_args__ = tuple(f.name for f in fields)  # type: ignore[misc,attr-defined]
    cls.__signature__ = _Signature()  # type: ignore[attr-defined]
    return cls


class _DataclassFields:
    """A record class's `__dataclass_fields__`, made on first use: real `dataclasses.Field`s, so
    that `dataclasses.is_dataclass`, `fields`, `asdict` and `replace` take records for the
    dataclasses they stand for. Stored on the class once made."""

    def __get__(self, owner: object, owner_type: type) -> dict[str, Any]:
        import dataclasses

        found = {}
        for f in getattr(owner_type, FIELDS):
            real: Any = dataclasses.field(
                default=dataclasses.MISSING if f.default is MISSING else f.default,
                default_factory=dataclasses.MISSING if f.default_factory is MISSING else f.default_factory,
                repr=f.repr, compare=f.compare)
            real.name, real.type = f.name, f.type
            real._field_type = dataclasses._FIELD  # type: ignore[attr-defined]  # what fields() keeps
            found[f.name] = real
        type.__setattr__(owner_type, "__dataclass_fields__", found)
        return found


if not TYPE_CHECKING:
    class _NoInstanceDict(type):
        """Gives each named tuple class `__slots__ = ()`: no instance dict, as typing's has none."""

        def __new__(mcls, name: str, bases: tuple, namespace: dict[str, Any], **kwargs: Any) -> Any:
            namespace.setdefault("__slots__", ())
            return super().__new__(mcls, name, bases, namespace, **kwargs)

    class NamedTuple(tuple, metaclass=_NoInstanceDict):
        """`typing.NamedTuple`'s stand-in at run time, made without compiling anything: typing's
        compiles each field's annotation (a `ForwardRef`, as they are text under `from __future__
        import annotations`) and the class's `__new__`, 0.2-0.4 ms a class in a new process. Fields
        (with defaults), `_fields`, `_field_defaults`, `_make`, `_replace`, `_asdict`, the repr and
        pickling behave as typing's; equality, hashing and unpacking are the tuple's."""

        _fields: tuple[str, ...] = ()
        _field_defaults: dict[str, Any] = {}
        _record_fields: tuple[Field, ...] = ()

        def __init_subclass__(cls, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            if NamedTuple not in cls.__bases__:
                return  # a subclass of a named tuple keeps its fields, as typing's does
            fields = []
            for index, (name, annotation) in enumerate(_own_annotations(cls).items()):
                f = Field(default=cls.__dict__.get(name, MISSING))
                f.name, f.type = name, annotation
                if fields and fields[-1].default is not MISSING and f.default is MISSING:
                    raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with a default")
                fields.append(f)
                setattr(cls, name, property(itemgetter(index), doc=f"Alias for field number {index}"))
            cls._record_fields = tuple(fields)
            cls._fields = cls.__match_args__ = tuple(f.name for f in fields)
            cls._field_defaults = {f.name: f.default for f in fields if f.default is not MISSING}

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            if kwargs or len(args) != len(cls._fields):
                args = _bound(cls.__qualname__, cls._record_fields, args, kwargs)
            return tuple.__new__(cls, args)

        def __getnewargs__(self) -> tuple:
            return tuple(self)

        def __repr__(self) -> str:
            return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in zip(self._fields, self))})"

        @classmethod
        def _make(cls, iterable: Any) -> Any:
            values = tuple(iterable)
            if len(values) != len(cls._fields):
                raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(values)}")
            return tuple.__new__(cls, values)

        def _replace(self, **changes: Any) -> Any:
            values = [changes.pop(n, v) for n, v in zip(self._fields, self)]
            if changes:
                raise ValueError(f"Got unexpected field names: {list(changes)!r}")
            return tuple.__new__(type(self), values)

        def _asdict(self) -> dict[str, Any]:
            return dict(zip(self._fields, self))
