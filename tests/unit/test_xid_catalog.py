"""The shipped XID catalog and its validation."""

from __future__ import annotations

import pytest

from voltpack.telemetry.device import TelemetryError
from voltpack.telemetry.xid_catalog import default_xid_catalog, parse_catalog


@pytest.mark.parametrize(
    ("xid", "action"),
    [
        (8, "none"),
        (13, "none"),
        (31, "none"),
        (43, "none"),
        (48, "reset"),
        (63, "reset"),
        (64, "reset"),
        (74, "reset"),
        (79, "reboot"),
        (92, "none"),
        (94, "reset"),
        (95, "reset"),
        (119, "reset"),
        (120, "reset"),
        (140, "reset"),
    ],
)
def test_shipped_actions_follow_nvidias_catalog(xid: int, action: str) -> None:
    assert default_xid_catalog().lookup(xid).action == action


def test_unknown_xid_gets_the_default_action_and_says_so() -> None:
    entry = default_xid_catalog().lookup(99_999)
    assert entry.action == "reset"
    assert entry.unsure
    assert "not in voltpack's catalog" in default_xid_catalog().signal(99_999).message


def test_signal_names_the_xid_and_the_action() -> None:
    signal = default_xid_catalog().signal(79)
    assert (signal.signal, signal.code, signal.action) == ("xid", 79, "reboot")
    assert signal.message == "XID 79: GPU has fallen off the bus (action: reboot)"


def test_unsure_entries_are_marked() -> None:
    unsure = {x for x, e in default_xid_catalog().entries.items() if e.unsure}
    assert {94, 154} <= unsure
    assert 79 not in unsure


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "expected a mapping with an `xids` mapping"),
        ({"xids": {48: {"name": "DBE", "action": "panic"}}}, "action 'panic' is not one of"),
        ({"xids": {48: {"action": "reset"}}}, "XID 48: needs a name"),
        ({"xids": {-1: {"name": "x", "action": "none"}}}, "expected a positive XID number"),
        ({"xids": {}, "default_action": "ignore"}, "default_action: action 'ignore'"),
    ],
)
def test_bad_catalogs_are_refused_clearly(document: object, message: str) -> None:
    with pytest.raises(TelemetryError, match="xid catalog") as error:
        parse_catalog(document)
    assert message in str(error.value)
