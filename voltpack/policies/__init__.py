"""Scheduling policy: the policy-file schema and the strategies its names select."""
