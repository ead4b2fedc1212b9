"""Paged lists, as the Kubernetes API pages them: `limit` and an opaque `continue` token.

A list route returns at most `limit` items in key order (a node's name, a job's
`namespace/name`). When more may follow, the `X-Continue` header holds a token to pass back as
`continue`; `X-Remaining-Item-Count` says how many items follow the page when that is known
(not with filters, as in Kubernetes); `X-List-Revision` is the list's revision, which grows
with every change the view takes in.

The token holds the last key returned and the revision of the list when the first page was
served. Pages are served from the live view, not from a snapshot: when the list changed
between two pages, the next page is what the list holds now after that key (every item is
listed at most once, in key order; one added or removed meanwhile before the key is not seen),
and the answer carries `X-Inconsistent-Continuation: true`, as Kubernetes serves a continuation
whose snapshot has expired ("inconsistent continuation"). A client that needs one consistent
list restarts from the first page when it sees that header.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Generic, TypeVar

from fastapi import Response

DEFAULT_LIMIT = 500
MAX_LIMIT = 5000
MAX_TOKEN_CHARS = 1024
TOKEN_VERSION = 1

CONTINUE_HEADER = "X-Continue"
REMAINING_HEADER = "X-Remaining-Item-Count"
REVISION_HEADER = "X-List-Revision"
INCONSISTENT_HEADER = "X-Inconsistent-Continuation"
NEXT_AFTER_HEADER = "X-Next-After"
"""The last key of a page when more follow (the older, plain-key form of `continue`)."""

LIMIT_TEXT = f"at most this many items, in key order (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})"
CONTINUE_TEXT = "the previous page's X-Continue token: the page after it"
AFTER_TEXT = "only items whose key sorts after this one (the previous page's X-Next-After)"

Item = TypeVar("Item")


@dataclass(frozen=True)
class ListPage(Generic[Item]):
    """One page of a list in key order."""

    items: list[Item]
    last_key: str | None
    """The key of the page's last item when more may follow; None: the list ends here."""
    remaining: int | None
    """How many items follow the page (None: not known, e.g. with filters)."""
    revision: int
    """The list's revision when the page was served."""


@dataclass(frozen=True)
class Continuation:
    """Where a page starts: after `after`, in a list first served at `revision`."""

    after: str | None
    revision: int | None


class ContinueTokenError(ValueError):
    """A `continue` token that this API did not issue for this list."""


def encode_continue(resource: str, after: str, revision: int) -> str:
    """The opaque token for the page after `after` of `resource`'s list at `revision`."""
    body = json.dumps({"v": TOKEN_VERSION, "r": resource, "k": after, "rv": revision})
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def decode_continue(token: str, resource: str) -> Continuation:
    """The continuation a token stands for; ContinueTokenError naming what is wrong."""
    fix = f"pass the X-Continue header of the previous page of /{resource} as it was, or drop it"
    if len(token) > MAX_TOKEN_CHARS:
        raise ContinueTokenError(f"continue: longer than {MAX_TOKEN_CHARS} characters; {fix}")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
    except (binascii.Error, ValueError):
        raise ContinueTokenError(f"continue: not a token this API issued; {fix}") from None
    if not isinstance(body, dict) or body.get("v") != TOKEN_VERSION:
        raise ContinueTokenError(f"continue: not a token this API issued; {fix}")
    if body.get("r") != resource:
        raise ContinueTokenError(f"continue: a token of another list ({body.get('r')!r}); {fix}")
    after, revision = body.get("k"), body.get("rv")
    if not isinstance(after, str) or not isinstance(revision, int) or isinstance(revision, bool):
        raise ContinueTokenError(f"continue: not a token this API issued; {fix}")
    return Continuation(after=after, revision=revision)


def start_of(resource: str, continue_token: str | None, after: str | None) -> Continuation:
    """Where the asked page starts: after the token's key, else after `after`, else at the
    first item (ContinueTokenError for a bad token, or for both given)."""
    if continue_token is None:
        return Continuation(after=after, revision=None)
    if after is not None:
        raise ContinueTokenError("continue and after: give one of them, not both")
    return decode_continue(continue_token, resource)


def send_page(response: Response, resource: str, page: ListPage[Item], start: Continuation) -> None:
    """The page's headers: where the next starts, what remains, the revision, and whether the
    list changed since the first page."""
    response.headers[REVISION_HEADER] = str(page.revision)
    if page.remaining is not None:
        response.headers[REMAINING_HEADER] = str(page.remaining)
    if page.last_key is not None:
        first_revision = page.revision if start.revision is None else start.revision
        response.headers[CONTINUE_HEADER] = encode_continue(resource, page.last_key, first_revision)
        response.headers[NEXT_AFTER_HEADER] = page.last_key
    if start.revision is not None and start.revision != page.revision:
        response.headers[INCONSISTENT_HEADER] = "true"
