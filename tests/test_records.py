"""records: `@record` classes behave as the dataclasses they replace (init, repr, ==, hash, frozen)."""
from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
import threading
from typing import ClassVar

import pytest

from jiter_magic.records import as_dict, field, fields_of, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 2
    tags: tuple[str, ...] = field(default=(), repr=False, compare=False)
    kind: ClassVar[str] = "point"


@record
class Tally:
    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@record(eq=False)
class Plan:
    size: int


@dataclasses.dataclass(frozen=True)
class PointDC:
    x: int
    y: int = 2
    tags: tuple[str, ...] = dataclasses.field(default=(), repr=False, compare=False)


def test_init_defaults_repr_and_equality_match_a_dataclass():
    p, d = Point(1), PointDC(1)
    assert (p.x, p.y, p.tags) == (d.x, d.y, d.tags) == (1, 2, ())
    assert repr(p) == "Point(x=1, y=2)" and repr(d) == "PointDC(x=1, y=2)"
    assert Point(1, 3, ("a",)) == Point(1, 3, ("b",))  # tags is not compared
    assert Point(1, 3) != Point(1, 4) and Point(1) != PointDC(1)
    assert hash(Point(1, 3, ("a",))) == hash(Point(1, 3))
    assert {Point(1): "a"}[Point(1, 2)] == "a"
    assert Point.kind == "point" and [f.name for f in fields_of(Point)] == ["x", "y", "tags"]
    assert Point.__match_args__ == ("x", "y", "tags")
    with pytest.raises(TypeError):
        Point()  # x has no default
    with pytest.raises(TypeError):
        Point(1, z=3)


def test_frozen_records_refuse_assignment_and_deletion():
    p = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        p.x = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]
    assert p.x == 1 and p.y == 2


def test_mutable_records_take_factories_and_are_unhashable():
    a, b = Tally(), Tally()
    assert a.lock is not b.lock and isinstance(a.lock, type(threading.Lock()))
    a.count += 1
    assert a.count == 1 and a != b and Tally(1, a.lock) == Tally(1, a.lock) != Tally(1, b.lock)
    assert repr(a) == "Tally(count=1)"
    with pytest.raises(TypeError):
        hash(a)


def test_eq_false_keeps_identity():
    a, b = Plan(1), Plan(1)
    assert a != b and a == a  # noqa: PLR0124
    assert len({a, b}) == 2


def test_replace_and_as_dict():
    p = Point(1, 3, ("t",))
    q = replace(p, y=7)
    assert (q.x, q.y, q.tags) == (1, 7, ("t",)) and p.y == 3
    assert as_dict(q) == {"x": 1, "y": 7, "tags": ("t",)}
    with pytest.raises(TypeError, match="no field"):
        replace(p, z=1)
    with pytest.raises(TypeError, match="not a record"):
        as_dict(object())


def test_records_pickle_and_copy():
    p = Point(4, 5, ("a",))
    for clone in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert clone == p and clone.tags == ("a",) and type(clone) is Point


def test_dataclasses_take_records_for_dataclasses():
    """Code written for the dataclasses these were keeps working: is_dataclass, fields, asdict,
    replace (and copy.replace on Python 3.13+), on the package's exported results too."""
    from jiter_magic import BenchmarkResult

    p = Point(1, 3, ("t",))
    assert dataclasses.is_dataclass(p) and dataclasses.is_dataclass(Point) and dataclasses.is_dataclass(Tally)
    assert [(f.name, f.type, f.repr, f.compare) for f in dataclasses.fields(p)] == [
        ("x", "int", True, True), ("y", "int", True, True), ("tags", "tuple[str, ...]", False, False)]
    assert dataclasses.fields(Point)[1].default == 2 and dataclasses.fields(Tally)[1].default_factory is threading.Lock
    assert dataclasses.asdict(p) == {"x": 1, "y": 3, "tags": ("t",)}
    q = dataclasses.replace(p, y=9)
    assert type(q) is Point and (q.x, q.y, q.tags) == (1, 9, ("t",))
    if hasattr(copy, "replace"):
        assert copy.replace(p, x=5) == Point(5, 3)
    r = BenchmarkResult("f", "CPU", 1e-3, 1e-3, 5, 1000, 1.0, 2.0, 0.5)
    assert dataclasses.asdict(r)["name"] == "f" and dataclasses.replace(r, name="g").name == "g"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.name = "x"  # type: ignore[misc]


def test_bad_definitions_are_refused():
    with pytest.raises(ValueError, match="mutable default"):
        @record
        class Bad:
            items: list = []  # noqa: RUF012

    with pytest.raises(TypeError, match="without a default follows"):
        @record
        class Order:
            a: int = 1
            b: int

    with pytest.raises(ValueError, match="not both"):
        field(default=1, default_factory=list)


def test_post_init_runs_and_subclass_fields_follow_the_base():
    @record
    class Base:
        a: int

        def __post_init__(self) -> None:
            self.a *= 2

    @record
    class Child(Base):
        b: int = 0

    c = Child(3, 4)
    assert (c.a, c.b) == (6, 4) and repr(c).endswith("Child(a=6, b=4)")


def test_importing_the_package_does_not_import_dataclasses():
    """The point of records: `import jiter_magic` compiles no dataclass (nor imports the module,
    which pulls in `inspect`)."""
    done = subprocess.run([sys.executable, "-c", "import sys, jiter_magic; print('dataclasses' in sys.modules)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_records_show_their_fields_as_a_dataclass_shows_them():
    """`help` and `inspect.signature` name the fields, defaults and factories, as for the dataclass."""
    import inspect

    assert str(inspect.signature(Point)) == str(inspect.signature(PointDC))
    assert [p.name for p in inspect.signature(Tally).parameters.values()] == ["count", "lock"]
    assert repr(inspect.signature(Tally).parameters["lock"].default) == "<factory>"


@pytest.mark.parametrize(("call", "message"), [
    (lambda: Point(), "missing 1 required argument"),
    (lambda: Point(1, 2, (), 4), "takes 4 positional arguments but 5 were given"),
    (lambda: Point(1, x=2), "multiple values for argument 'x'"),
    (lambda: Point(1, z=3), "unexpected keyword argument 'z'"),
])
def test_a_wrong_call_raises_what_a_dataclass_raises(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_keywords_defaults_and_factories_fill_a_record_as_a_dataclass():
    assert Point(y=5, x=1) == Point(1, 5) and Point(1).tags == ()
    assert (Tally(count=3).count, Tally().count) == (3, 0) and Tally().lock is not Tally().lock


def test_the_named_tuple_stand_in_behaves_as_typings():
    """records.NamedTuple (made without compiling anything) against typing.NamedTuple."""
    import typing

    from jiter_magic.records import NamedTuple

    class Ours(NamedTuple):
        path: str
        ndim: int
        vec: int = 1
        pack: int = 1

    class Theirs(typing.NamedTuple):
        path: str
        ndim: int
        vec: int = 1
        pack: int = 1

    ours, theirs = Ours("tiled", 2, pack=4), Theirs("tiled", 2, pack=4)
    assert tuple(ours) == tuple(theirs) == ("tiled", 2, 1, 4) and ours == theirs and hash(ours) == hash(theirs)
    assert repr(ours) == repr(theirs).replace("Theirs", "Ours")
    assert (ours.path, ours.ndim, ours.vec, ours.pack) == ("tiled", 2, 1, 4)
    assert Ours._fields == Theirs._fields and Ours._field_defaults == Theirs._field_defaults
    assert ours._replace(vec=2) == ("tiled", 2, 2, 4) and type(ours._replace(vec=2)) is Ours
    assert ours._asdict() == theirs._asdict() and Ours._make(["a", 1, 2, 3]) == ("a", 1, 2, 3)
    from jiter_magic.kernels.base import PathChoice

    choice = PathChoice("tiled", 2, pack=4)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        clone = pickle.loads(pickle.dumps(choice, protocol))
        assert clone == choice and type(clone) is PathChoice and clone.pack == 4
    assert copy.deepcopy(choice) == choice and type(copy.copy(choice)) is PathChoice
    with pytest.raises(AttributeError):
        choice.unknown = 1  # type: ignore[attr-defined]  # no instance dict, as typing's
    path, ndim, *_ = ours
    assert (path, ndim) == ("tiled", 2)
    with pytest.raises(TypeError, match="missing 1 required argument"):
        Ours("tiled")
    with pytest.raises(ValueError, match="unexpected field names"):
        ours._replace(width=3)
    with pytest.raises(AttributeError):
        ours.vec = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="without a default follows"):
        class Bad(NamedTuple):
            a: int = 1
            b: int


    class Extended(Ours):  # a subclass adds methods, not fields, as for typing's
        extra: int = 0

        def twice(self) -> int:
            return 2 * self.ndim

    extended = Extended("rows", 3)
    assert Extended._fields == Ours._fields and tuple(extended) == ("rows", 3, 1, 1)
    assert (extended.path, extended.ndim, extended.twice(), Extended.extra) == ("rows", 3, 6, 0)


@pytest.mark.slow
def test_importing_the_package_compiles_no_source():
    """A new process's first result pays for every `compile`/`exec` of generated source at import
    (0.06-0.2 ms each): records, the NamedTuple stand-in and their users compile none (an audit hook
    counts them; a module's own file, compiled where no bytecode is cached, and `re` patterns are
    not counted)."""
    script = ("import sys, torch\ncompiled = []\n"
              "sys.addaudithook(lambda event, args: compiled.append(args[1]) if event == 'compile' else None)\n"
              "import jiter_magic\nprint([c for c in compiled if not str(c).endswith('.py')])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
