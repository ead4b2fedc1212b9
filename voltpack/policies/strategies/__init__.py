"""Scoring strategies, one module each; `voltpack.policies.registry` maps names to them."""
