"""The emulator against a real kube-apiserver + etcd: the conformance corpus, replayed on both.

Every request of `tests/conformance/corpus.py` (voltpack's own calls, its tests' and kubectl's)
goes to a fresh emulator and to a real control plane (`make k8s`), then the kubectl commands of
`tests/conformance/kubectl.py` run against both; their answers are normalised
(uids, resourceVersions, timestamps, generated names, managedFields) and compared path by path.
A divergence fails the test unless the corpus documents it (`Known`), and a documented
divergence that no longer occurs fails it too, so the notes stay true.
`python -m tests.conformance.report` writes the same comparison as docs/emulator-conformance.md.
"""

from __future__ import annotations

import pytest

from tests.conformance.backends import Results, run_both
from tests.conformance.corpus import all_steps
from tests.conformance.kubectl import KUBECTL_STEPS
from tests.conformance.kubectl import differences as kubectl_differences
from tests.conformance.replay import compare, documented
from tests.integration.services import missing_service
from tests.k8s_control_plane import bin_dir, missing_binaries

STEPS = all_steps()


@pytest.fixture(scope="module")
def results() -> Results:
    """The corpus's and kubectl's answers from the real control plane and from the emulator."""
    missing = missing_binaries()
    if missing:
        missing_service("kube-apiserver", f"{', '.join(missing)} not built in {bin_dir()}")
    return run_both(STEPS)


def _corpus_problems(results: Results) -> list[str]:
    problems = []
    for step in STEPS:
        differences = compare(step, results.real[step.name], results.emulator[step.name])
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
    return problems


def _kubectl_problems(results: Results) -> list[str]:
    problems = []
    for step in KUBECTL_STEPS:
        real, emulator = results.kubectl_real[step.name], results.kubectl_emulator[step.name]
        found = kubectl_differences(step, real, emulator)
        if found and not step.known:
            problems += found
        if step.known and not found:
            problems.append(f"kubectl {step.name}: documented divergence no longer occurs")
    return problems


def test_emulator_answers_as_kube_apiserver(results: Results) -> None:
    """One test for the corpus and the kubectl steps (one control plane, also under xdist);
    it lists every undocumented divergence and every documented one that no longer occurs."""
    problems = _corpus_problems(results) + _kubectl_problems(results)
    assert not problems, (
        f"{len(problems)} conformance problems; fix the emulator, or document why a divergence "
        "does not matter (tests/conformance/corpus.py KNOWN, kubectl.py known):\n"
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
