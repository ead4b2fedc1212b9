"""The two backends of the conformance run: the emulator and a real kube-apiserver + etcd.

Both know the same admin token (the real one from its token file, the emulator from a token file
of the same format), so TokenReview answers alike. The emulator's simulated kubelets never get
to start or stop a pod (their delays are a day): no kubelet runs beside the real apiserver
either, so bound pods stay Pending and deleted bound pods stay Terminating on both.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conformance import kubectl
from tests.conformance.corpus import ADMIN_USER, Step
from tests.conformance.kubectl import KubectlAnswer
from tests.conformance.replay import Answer, Backend, replay
from tests.k8s_control_plane import running_control_plane
from voltpack.emulator import EmulatorConfig, running_emulator

KUBELET_NEVER_S = 86_400.0


@contextlib.contextmanager
def real_backend() -> Iterator[Backend]:
    """kube-apiserver + etcd (built by `make k8s`); raises ControlPlaneError if not built."""
    with running_control_plane() as plane:
        yield Backend("real", plane.url, plane.token, str(plane.ca_file))


@contextlib.contextmanager
def emulator_backend(token: str) -> Iterator[Backend]:
    """A fresh emulator without nodes or kubelets that accepts `token` as the admin's."""
    with tempfile.TemporaryDirectory(prefix="voltpack-conformance-") as tmp:
        tokens = Path(tmp) / "tokens.csv"
        tokens.write_text(f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        config = EmulatorConfig(
            token_file=tokens,
            seed=1,
            pod_start_delay_s=KUBELET_NEVER_S,
            pod_stop_delay_s=KUBELET_NEVER_S,
        )
        with running_emulator(config=config) as emulator:
            yield Backend("emulator", emulator.url, token)


@dataclass
class Results:
    """The corpus's and the kubectl steps' answers from both backends, and how long it took."""

    real: dict[str, Answer]
    emulator: dict[str, Answer]
    kubectl_real: dict[str, KubectlAnswer]
    kubectl_emulator: dict[str, KubectlAnswer]
    runtime_s: float


def run_both(steps: list[Step]) -> Results:
    """Replays `steps` and then the kubectl steps on a real control plane and on an emulator."""
    started = time.monotonic()
    with real_backend() as real:
        real_answers = replay(real, steps)
        real_kubectl = kubectl.run(real)
        with emulator_backend(real.token) as emulator:
            emulator_answers = replay(emulator, steps)
            emulator_kubectl = kubectl.run(emulator)
    return Results(
        real_answers,
        emulator_answers,
        real_kubectl,
        emulator_kubectl,
        time.monotonic() - started,
    )
