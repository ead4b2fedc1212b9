"""Hostile policy YAML shaped like the reproductions of issue 30 (small, generated here)."""

from __future__ import annotations

HEADER = "apiVersion: voltpack.io/v1alpha1\nkind: SchedulingPolicy\n"

ALIAS_BOMB = (
    HEADER
    + "x-anchors:\n"
    + '  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"  a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 6))
    + "metadata:\n  name: *a5\nspec:\n  scoring: {strategy: fgd}\n"
)
"""454 bytes that expand to about a million values ('billion laughs')."""

DEEP_NESTING = HEADER + "metadata: {name: a}\nspec: " + "[" * 5000 + "]" * 5000 + "\n"
"""Five thousand nested lists: a RecursionError in an unbounded YAML composer."""

RECURSIVE_ALIAS = HEADER + "metadata: {name: a}\nspec: &loop {scoring: *loop}\n"
"""An alias inside the collection it names."""
