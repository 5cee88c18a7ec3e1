"""`Runtime.part`: one instance a kind, also when making one part asks for another."""
from __future__ import annotations

import threading

from jiter_magic.state import Runtime


class Inner:
    pass


def test_a_part_whose_constructor_asks_for_another_part_is_made_without_waiting_forever():
    runtime = Runtime()

    class Outer:  # as the kernel pool's memory cache asks for the counters while it is made
        def __init__(self) -> None:
            self.inner = runtime.part(Inner)

    made: list[Outer] = []
    worker = threading.Thread(target=lambda: made.append(runtime.part(Outer)), daemon=True)
    worker.start()
    worker.join(timeout=30)  # a plain lock would leave the thread waiting on itself
    assert made and made[0].inner is runtime.part(Inner)
    assert runtime.part(Outer) is made[0]
    assert {type(p) for p in runtime.parts()} == {Inner, Outer}
