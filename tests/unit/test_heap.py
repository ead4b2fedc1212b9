"""The operator's heap keeper freezes what outlives a cycle and thaws it on schedule; the
collector's pauses are counted per generation."""

from __future__ import annotations

import gc
import weakref

from voltpack.operator.heap import GcPauses, HeapKeeper


class Cycle:
    """A reference cycle, which only the cyclic collector frees."""

    def __init__(self) -> None:
        self.me = self


def test_a_cycle_freezes_what_it_leaves_and_a_thaw_collects_what_was_frozen() -> None:
    now = [0.0]
    keeper = HeapKeeper(clock=lambda: now[0], thaw_interval_s=600.0)
    try:
        gc.unfreeze()
        Cycle()  # garbage the young collection frees before the freeze
        keeper.after_cycle()
        assert gc.get_freeze_count() > 0 and (keeper.freezes, keeper.thaws) == (1, 0)

        survivor = Cycle()
        alive = weakref.ref(survivor)
        keeper.after_cycle()  # frozen while alive
        del survivor  # now cyclic garbage among frozen objects
        gc.collect()
        assert alive() is not None  # a collection does not look at frozen objects

        now[0] = 600.0
        keeper.after_cycle()  # the thaw: unfrozen, collected in full, frozen again
        assert keeper.thaws == 1 and alive() is None
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_collectors_pauses_are_counted_per_generation() -> None:
    pauses = GcPauses()
    pauses.install()
    pauses.install()  # once only
    try:
        gc.collect()
        gc.collect(0)
    finally:
        pauses.remove()
    assert pauses.collections[2] >= 1 and pauses.collections[0] >= 1
    assert pauses.seconds[2] > 0
    counted = list(pauses.collections)
    gc.collect()
    assert pauses.collections == counted  # removed: no longer counted
