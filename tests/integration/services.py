"""What a test does when a service it needs is missing: fail in CI, skip (naming it) elsewhere."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing_service(message: str) -> NoReturn:
    """CI (CI set) runs every test, so a missing service fails it; a developer's run skips it
    with `message`, which names the service and how to install it."""
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI runs every test; .ci/run installs what is missing)")
    pytest.skip(message)
