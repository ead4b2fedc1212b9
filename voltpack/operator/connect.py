"""Connecting to a Kubernetes API server: an explicit URL, in-cluster, or kubeconfig."""

from __future__ import annotations

from kubernetes import client, config


def api_client(server: str | None = None) -> client.ApiClient:
    """A client for `server` (e.g. the emulator's URL), else in-cluster, else kubeconfig."""
    if server:
        configuration = client.Configuration()
        configuration.host = server.rstrip("/")
        return client.ApiClient(configuration)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()
