"""Fault injection: make matching requests fail or wait, for tests of retry and recovery.

Rules are added from any thread (the test's) and consumed on the server's loop. Dropping
watch streams and compacting the history act on server state and so go through
`RunningEmulator` (see `runner.py`), which runs them on the loop.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from voltpack.emulator.errors import EmulatorError


@dataclass
class FaultRule:
    """The next `remaining` requests matching method/verb/path get `status` after `delay_s`."""

    remaining: int
    status: int | None = None
    delay_s: float = 0.0
    method: str | None = None
    verb: str | None = None
    path: re.Pattern[str] | None = None
    message: str | None = None
    hits: int = 0

    def matches(self, method: str, verb: str | None, path: str) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if self.verb is not None and self.verb != verb:
            return False
        return self.path is None or self.path.search(path) is not None


class Faults:
    """Thread-safe list of fault rules, consulted once per request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def fail_next(
        self,
        count: int = 1,
        *,
        status: int = 500,
        path: str | None = None,
        verb: str | None = None,
        method: str | None = None,
        message: str | None = None,
        delay_s: float = 0.0,
    ) -> FaultRule:
        """The next `count` matching requests answer `status` with a v1 Status body.

        `path` is a regular expression searched in the request path (e.g. `/pods`), `verb` a
        Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection),
        `method` an HTTP method. Unset filters match everything.
        """
        if not 400 <= status <= 599:
            raise EmulatorError(f"fail_next: status must be a 4xx or 5xx code, got {status}")
        return self._add(
            FaultRule(
                count,
                status=status,
                delay_s=delay_s,
                method=method,
                verb=verb,
                path=re.compile(path) if path else None,
                message=message,
            )
        )

    def delay_next(
        self,
        seconds: float,
        count: int = 1,
        *,
        path: str | None = None,
        verb: str | None = None,
        method: str | None = None,
    ) -> FaultRule:
        """The next `count` matching requests are answered normally after `seconds`."""
        return self._add(
            FaultRule(
                count,
                delay_s=seconds,
                method=method,
                verb=verb,
                path=re.compile(path) if path else None,
            )
        )

    def _add(self, rule: FaultRule) -> FaultRule:
        if rule.remaining < 1:
            raise EmulatorError(f"fault rule: count must be at least 1, got {rule.remaining}")
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, method: str, verb: str | None, path: str) -> FaultRule | None:
        """The first matching rule, with one use consumed (exhausted rules are removed)."""
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, verb, path):
                    rule.remaining -= 1
                    rule.hits += 1
                    if rule.remaining <= 0:
                        self._rules.remove(rule)
                    return rule
        return None

    def pending(self) -> int:
        """How many injected failures or delays are still to be served."""
        with self._lock:
            return sum(rule.remaining for rule in self._rules)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
