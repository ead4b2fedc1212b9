"""Connecting to a Kubernetes API server: an explicit URL, in-cluster, or kubeconfig."""

from __future__ import annotations

from kubernetes import client, config

POOL_CONNECTIONS = 32
"""HTTP connections kept open to the API server: one per cache's watch plus the binding
threads (the client's default, 5 per CPU, would open and drop a connection per binding)."""


def api_client(server: str | None = None) -> client.ApiClient:
    """A client for `server` (e.g. the emulator's URL), else in-cluster, else kubeconfig."""
    if server:
        configuration = client.Configuration()
        configuration.host = server.rstrip("/")
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize, POOL_CONNECTIONS
    )
    return client.ApiClient(configuration)
