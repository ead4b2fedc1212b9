"""Topology-aware gang placement policies: voltpack's step-time placement and the Kueue/KAI baselines."""
