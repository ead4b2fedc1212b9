"""voltpack's own exception types for errors a user can cause."""


class VoltpackError(Exception):
    """Base class of every error a user can cause and fix (bad input, impossible request)."""


class CatalogError(VoltpackError):
    """The GPU SKU catalog is malformed or a GPU model is unknown."""


class PolicyError(VoltpackError):
    """A policy file is malformed or names an unknown strategy."""


class TraceFormatError(VoltpackError):
    """A trace file has a malformed row; the message names the file, line and field."""


class InvalidRequestError(VoltpackError):
    """A workload asks for something no cluster can ever satisfy."""


class PowerConfigError(VoltpackError):
    """A power-domain tree or power policy is malformed (unknown parent, cycle, bad budget)."""


class ForecastError(VoltpackError):
    """A history cannot be forecast (too short, negative where counts are meant, no finite
    value); the message names the series and what to change."""
