"""Queues: the tree, GPU usage per queue and GPU model, limits, guarantees and borrowing.

Pure: built from `QueueSpec`s, fed with running gangs; no I/O, no clock.

A queue's usage is the sum over its subtree (its own gangs and its child queues'), in GPUs per
GPU model (a share of a GPU counts as its fraction). A quota entry names a GPU model, or `*`
for all models together. For a gang on GPU model M, the entries of a queue that apply are the
one for M and the one for `*`:

- *limit*: usage may never exceed the limit of any applying entry, on the gang's queue or any
  ancestor (no entry: no limit);
- *guarantee*: usage up to the guarantee is the queue's own; above it (or on a model without an
  applying entry) the queue *borrows*. Borrowing only takes idle GPUs; borrowed GPUs may be
  reclaimed by a gang that stays within its own queue's guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from voltpack.model.resources.queue import ANY_GPU_MODEL, QueueSpec
from voltpack.model.work import GpuAmounts

DEFAULT_QUEUE = "default"
"""Gangs that name no queue go here; it exists (no quotas, weight 1) unless a Queue defines it."""
EPSILON_GPUS = 1e-9


@dataclass(frozen=True)
class Quota:
    """One quota entry of a queue, in GPUs (`limit` None: no limit)."""

    guaranteed: float
    limit: float | None


@dataclass(frozen=True)
class QueueNode:
    """One valid queue."""

    name: str
    parent: str | None
    weight: float
    quotas: Mapping[str, Quota]
    """By GPU model, `*` for all models together."""


@dataclass(frozen=True)
class Bound:
    """A quota entry checked against an amount: `used` GPUs against `bound` GPUs."""

    queue: str
    key: str
    used: float
    bound: float

    def describe(self, what: str) -> str:
        """e.g. 'queue a: A100 14 of limit 16 GPUs'."""
        return f"queue {self.queue}: {self.key} {self.used:g} of {what} {self.bound:g} GPUs"


@dataclass
class QueueTree:
    """Valid queues by name, and the problem of each queue that cannot be used."""

    queues: dict[str, QueueNode]
    invalid: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls, specs: Mapping[str, QueueSpec], invalid_specs: Mapping[str, str] | None = None
    ) -> QueueTree:
        """Validate parents (known, valid, no cycles); an invalid queue never hides a valid one.

        `invalid_specs`: queues whose spec could not even be read, with the problem.
        """
        invalid: dict[str, str] = dict(invalid_specs or {})
        for name, spec in specs.items():
            chain = [name]
            current = spec
            while current.parent is not None:
                parent = current.parent
                if parent in chain:
                    invalid[name] = "parents form a cycle: " + " -> ".join([*chain, parent])
                    break
                if parent in (invalid_specs or {}):
                    invalid[name] = f"queue {chain[-1]}: parent {parent!r} is invalid"
                    break
                if parent not in specs:
                    known = ", ".join(sorted(specs)) or "none"
                    invalid[name] = (
                        f"queue {chain[-1]}: parent {parent!r} is not a queue "
                        f"(known queues: {known}); fix spec.parent or create queue {parent!r}"
                    )
                    break
                chain.append(parent)
                current = specs[parent]
        queues = {
            name: QueueNode(
                name=name,
                parent=spec.parent,
                weight=spec.weight,
                quotas={q.gpu_model: Quota(q.guaranteed, q.limit) for q in spec.quotas},
            )
            for name, spec in specs.items()
            if name not in invalid
        }
        if DEFAULT_QUEUE not in specs and DEFAULT_QUEUE not in invalid:
            queues[DEFAULT_QUEUE] = QueueNode(DEFAULT_QUEUE, None, 1.0, {})
        return cls(queues=queues, invalid=invalid)

    def problem(self, name: str) -> str | None:
        """Why gangs of queue `name` cannot be scheduled, or None if the queue is usable."""
        if name in self.queues:
            return None
        if name in self.invalid:
            return f"queue {name} is invalid: {self.invalid[name]}"
        return f"queue {name!r} does not exist; create a Queue {name!r} or fix the job's queue"

    def chain(self, name: str) -> tuple[str, ...]:
        """The queue and its ancestors, leaf first."""
        names = [name]
        parent = self.queues[name].parent
        while parent is not None:
            names.append(parent)
            parent = self.queues[parent].parent
        return tuple(names)

    def below_common_ancestor(self, name: str, other: str) -> tuple[str, ...]:
        """`name`'s chain up to, not including, the lowest ancestor it shares with `other`."""
        shared = set(self.chain(other))
        result = []
        for queue in self.chain(name):
            if queue in shared:
                break
            result.append(queue)
        return tuple(result)


@dataclass
class QueueUsage:
    """GPUs in use per queue (its subtree) and GPU model."""

    tree: QueueTree
    gpus: dict[str, GpuAmounts] = field(default_factory=dict)

    def add(self, queue: str, amounts: Mapping[str, float], sign: float = 1.0) -> None:
        """Count `amounts` for `queue` and every ancestor (sign -1 takes them back)."""
        for name in self.tree.chain(queue):
            used = self.gpus.setdefault(name, {})
            for model, amount in amounts.items():
                used[model] = used.get(model, 0.0) + sign * amount
                if abs(used[model]) < EPSILON_GPUS:
                    del used[model]

    def of(self, queue: str) -> GpuAmounts:
        """Usage of `queue` (a copy)."""
        return dict(self.gpus.get(queue, {}))

    def copy(self) -> QueueUsage:
        """An independent copy."""
        return QueueUsage(self.tree, {q: dict(a) for q, a in self.gpus.items()})


def applying_bounds(
    node: QueueNode, used: Mapping[str, float], model: str, which: Literal["guaranteed", "limit"]
) -> Iterator[Bound]:
    """The entries of `node` that apply to GPU model `model`, against `used`.

    Without an entry for `model` or `*`, the guarantee is 0 and there is no limit.
    """
    found = False
    for key in (model, ANY_GPU_MODEL):
        quota = node.quotas.get(key)
        if quota is None:
            continue
        found = True
        amount = sum(used.values()) if key == ANY_GPU_MODEL else used.get(model, 0.0)
        bound = quota.guaranteed if which == "guaranteed" else quota.limit
        if bound is not None:
            yield Bound(node.name, key, amount, bound)
    if not found and which == "guaranteed":
        yield Bound(node.name, model, used.get(model, 0.0), 0.0)


def with_added(used: Mapping[str, float], amounts: Mapping[str, float]) -> GpuAmounts:
    """`used` plus `amounts`, per model."""
    total = dict(used)
    for model, amount in amounts.items():
        total[model] = total.get(model, 0.0) + amount
    return total


def exceeded(
    usage: QueueUsage,
    queues: Iterable[str],
    model: str,
    extra_gpus: float,
    which: Literal["guaranteed", "limit"],
) -> Bound | None:
    """The first bound of `queues` that `extra_gpus` more on `model` would exceed, or None."""
    for name in queues:
        used = with_added(usage.of(name), {model: extra_gpus})
        for bound in applying_bounds(usage.tree.queues[name], used, model, which):
            if bound.used > bound.bound + EPSILON_GPUS:
                return bound
    return None


def borrowing(usage: QueueUsage, queues: Iterable[str], models: Iterable[str]) -> Bound | None:
    """The first bound of `queues` whose usage is above its guarantee on any of `models`."""
    for model in models:
        found = exceeded(usage, queues, model, 0.0, "guaranteed")
        if found is not None:
            return found
    return None


def at_limit(usage: QueueUsage, queue: str) -> list[Bound]:
    """The limits of `queue` itself that its usage has reached."""
    node = usage.tree.queues[queue]
    used = usage.of(queue)
    reached = []
    for key, quota in sorted(node.quotas.items()):
        if quota.limit is None:
            continue
        amount = sum(used.values()) if key == ANY_GPU_MODEL else used.get(key, 0.0)
        if amount >= quota.limit - EPSILON_GPUS:
            reached.append(Bound(queue, key, amount, quota.limit))
    return reached


def borrowed(usage: QueueUsage, queue: str) -> GpuAmounts:
    """GPUs `queue` uses above its guarantee, per quota key (a model, or `*`)."""
    node = usage.tree.queues[queue]
    used = usage.of(queue)
    result: GpuAmounts = {}
    for model in sorted(used):
        for bound in applying_bounds(node, used, model, "guaranteed"):
            if bound.used > bound.bound + EPSILON_GPUS:
                result[bound.key] = round(bound.used - bound.bound, 6)
    return result
