"""Inference services: request-size buckets, the GPU-type mix at an SLO (MILP), Mélange's
formulation as a baseline, GPU prices."""
