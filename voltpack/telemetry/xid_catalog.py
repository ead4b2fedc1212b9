"""The XID catalog (`xid_catalog.yaml`): XID number -> meaning and the action it calls for."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, cast, get_args

import yaml

from voltpack.model.resources.gpunode import FaultAction
from voltpack.telemetry.device import TelemetryError
from voltpack.telemetry.faults import FaultSignal


@dataclass(frozen=True)
class XidEntry:
    """One XID: NVIDIA's name for it and voltpack's action."""

    xid: int
    name: str
    action: FaultAction
    unsure: bool = False
    note: str = ""


@dataclass(frozen=True)
class XidCatalog:
    """Known XIDs and the action for the rest."""

    entries: dict[int, XidEntry]
    default_action: FaultAction

    def lookup(self, xid: int) -> XidEntry:
        """The entry of `xid`; an unknown XID gets the default action."""
        entry = self.entries.get(xid)
        if entry is not None:
            return entry
        return XidEntry(xid, "XID not in voltpack's catalog", self.default_action, unsure=True)

    def signal(self, xid: int) -> FaultSignal:
        """The fault signal of one XID event."""
        entry = self.lookup(xid)
        return FaultSignal(
            "xid", entry.action, f"XID {xid}: {entry.name} (action: {entry.action})", xid
        )


def _action(value: Any, where: str) -> FaultAction:
    if value not in get_args(FaultAction):
        raise TelemetryError(
            f"xid catalog: {where}: action {value!r} is not one of {get_args(FaultAction)}"
        )
    return cast(FaultAction, value)


def parse_catalog(data: Any) -> XidCatalog:
    """Validate the YAML document of an XID catalog."""
    if not isinstance(data, dict) or not isinstance(data.get("xids"), dict):
        raise TelemetryError("xid catalog: expected a mapping with an `xids` mapping")
    entries: dict[int, XidEntry] = {}
    for key, raw in data["xids"].items():
        if not isinstance(key, int) or key <= 0 or not isinstance(raw, dict):
            raise TelemetryError(f"xid catalog: entry {key!r}: expected a positive XID number")
        if not isinstance(raw.get("name"), str) or not raw["name"]:
            raise TelemetryError(f"xid catalog: XID {key}: needs a name")
        entries[key] = XidEntry(
            key,
            raw["name"],
            _action(raw.get("action"), f"XID {key}"),
            bool(raw.get("unsure", False)),
            str(raw.get("note", "")),
        )
    return XidCatalog(entries, _action(data.get("default_action", "reset"), "default_action"))


@cache
def default_xid_catalog() -> XidCatalog:
    """The catalog shipped with voltpack."""
    text = resources.files("voltpack.telemetry").joinpath("xid_catalog.yaml").read_text("utf-8")
    return parse_catalog(yaml.safe_load(text))
