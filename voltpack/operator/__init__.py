"""Kubernetes adapters: CRDs, watches and caches, reconcilers, the binder, leader election."""
