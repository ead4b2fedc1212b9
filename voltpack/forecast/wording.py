"""How decisions name times and quantities in their plain-words explanations."""

from __future__ import annotations

from datetime import UTC, datetime


def clock_label(time_s: float) -> str:
    """A time in seconds since the epoch as `HH:MM UTC` (the day too, past the first day
    of the epoch: traces that count from 0 read as times of their first days)."""
    moment = datetime.fromtimestamp(time_s, tz=UTC)
    if time_s < 7 * 86_400:
        day = int(time_s // 86_400)
        return f"{moment:%H:%M} UTC" if day == 0 else f"day {day + 1} {moment:%H:%M} UTC"
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def duration_label(duration_s: float) -> str:
    """A duration as `10 min`, `2 h`, `1 h 30 min` or `45 s`."""
    if duration_s < 60:
        return f"{duration_s:g} s"
    minutes = round(duration_s / 60)
    hours, rest = divmod(minutes, 60)
    if hours == 0:
        return f"{rest} min"
    return f"{hours} h" if rest == 0 else f"{hours} h {rest} min"


def watts_label(power_w: float) -> str:
    """Power with a readable unit: `850 W`, `172.2 kW`, `1.20 MW`."""
    magnitude = abs(power_w)
    if magnitude >= 1e6:
        return f"{power_w / 1e6:.2f} MW"
    if magnitude >= 1e3:
        return f"{power_w / 1e3:.1f} kW"
    return f"{power_w:.0f} W"
