"""Connecting to a Kubernetes API server: an explicit URL, in-cluster, or kubeconfig."""

from __future__ import annotations

from kubernetes import client, config

POOL_CONNECTIONS = 64
"""HTTP connections kept open to the API server: one per cache's watch (16), the binding
threads (16), the Event threads (2), the power loop's and the Lease's, with room to spare. When
more are in use at once, urllib3 opens another and closes it after one request (a TLS handshake
each time); the client's default, 5 per CPU, would do that for most bindings."""


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
