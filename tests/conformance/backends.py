"""The two backends of the conformance run: the emulator and a real kube-apiserver + etcd.

Both know the same admin token (the real one from its token file, the emulator from a token file
of the same format), so TokenReview answers alike. The emulator's simulated kubelets never get
to start or stop a pod (their delays are a day): no kubelet runs beside the real apiserver
either, so bound pods stay Pending and deleted bound pods stay Terminating on both.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.conformance.corpus import ADMIN_USER
from tests.conformance.replay import Backend
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
