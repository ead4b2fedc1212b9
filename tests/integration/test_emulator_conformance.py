"""The emulator against a real kube-apiserver + etcd: the conformance corpus, replayed on both.

Every request of `tests/conformance/corpus.py` (voltpack's own calls, its tests' and kubectl's)
goes to a fresh emulator and to a real control plane (`make k8s`); their answers are normalised
(uids, resourceVersions, timestamps, generated names, managedFields) and compared path by path.
A divergence fails the test unless the corpus documents it (`Known`), and a documented
divergence that no longer occurs fails it too, so the notes stay true.
`python -m tests.conformance.report` writes the same comparison as docs/emulator-conformance.md.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.backends import emulator_backend, real_backend
from tests.conformance.corpus import all_steps
from tests.conformance.replay import Answer, compare, documented, replay
from tests.integration.services import missing_service
from tests.k8s_control_plane import bin_dir, missing_binaries

STEPS = all_steps()


@pytest.fixture(scope="module")
def answers() -> Iterator[tuple[dict[str, Answer], dict[str, Answer]]]:
    """The corpus's answers from the real control plane and from the emulator."""
    missing = missing_binaries()
    if missing:
        missing_service("kube-apiserver", f"{', '.join(missing)} not built in {bin_dir()}")
    with real_backend() as real:
        real_answers = replay(real, STEPS)
        with emulator_backend(real.token) as emulator:
            yield real_answers, replay(emulator, STEPS)


def test_emulator_answers_as_kube_apiserver(
    answers: tuple[dict[str, Answer], dict[str, Answer]],
) -> None:
    """One test for the whole corpus (one control plane, also under xdist); it lists every
    undocumented divergence and every documented one that no longer occurs."""
    real, emulator = answers
    problems = []
    for step in STEPS:
        differences = compare(step, real[step.name], emulator[step.name])
        problems += [
            f"undocumented ({step.method} {step.path}, {step.source}): {d}"
            for d in differences
            if documented(d, step) is None
        ]
        used = {k.pattern for d in differences if (k := documented(d, step)) is not None}
        problems += [
            f"stale note of {step.name} (the divergence no longer occurs): {k.pattern}"
            for k in step.known
            if k.pattern not in used
        ]
    assert not problems, (
        f"{len(problems)} conformance problems; fix the emulator, or document in "
        "tests/conformance/corpus.py (KNOWN) why a divergence does not matter:\n"
        + "\n".join(problems)
    )


def test_the_corpus_covers_what_voltpack_sends() -> None:
    """Each kind of request the issue names is in the corpus at least once."""
    methods = {(step.method, step.content_type) for step in STEPS}
    for wanted in [("PATCH", "application/merge-patch+json"),
                   ("PATCH", "application/strategic-merge-patch+json"),
                   ("PATCH", "application/json-patch+json"),
                   ("PATCH", "application/apply-patch+yaml"), ("PUT", "application/json"),
                   ("DELETE", "application/json"), ("POST", "application/json")]:  # fmt: skip
        assert wanted in methods, wanted
    paths = " ".join(step.path for step in STEPS)
    wanted_paths = (
        "/binding",
        "/eviction",
        "/status",
        "leases",
        "events",
        "tokenreviews",
        "subjectaccessreviews",
        "customresourcedefinitions",
        "gpujobs",
        "gpunodes",
    )
    for part in wanted_paths:
        assert part in paths, part
    queries = {key for step in STEPS for key, _ in step.query}
    assert {"labelSelector", "fieldSelector", "limit", "continue", "watch", "resourceVersion",
            "allowWatchBookmarks", "sendInitialEvents", "dryRun"} <= queries  # fmt: skip
    assert len(STEPS) >= 150
