"""The store's own errors: each names what was wrong and how to fix it."""

from __future__ import annotations

from voltpack.model.errors import VoltpackError


class StoreError(VoltpackError):
    """Base class of the store's errors."""


class StoreConfigError(StoreError):
    """The database URL or a store setting is malformed or names an unsupported database."""


class InvalidCursorError(StoreError, ValueError):
    """A pagination cursor that this store did not hand out (or that was altered)."""


class RecordNotFoundError(StoreError, LookupError):
    """A record asked for by id does not exist (a simulation run, for instance)."""


class InvalidRecordError(StoreError, ValueError):
    """A record to write has a value outside its range (a progress above 1, an unknown status)."""


class StoreUnavailableError(StoreError):
    """The database cannot be reached; history is unavailable (answer 503), control goes on."""
