"""Kubernetes plumbing: API calls, caches, leader election, CRDs, bindings and Events,
status writes."""
