"""Topology-aware gang placement: voltpack's step-time placement and the Kueue/KAI baselines."""
