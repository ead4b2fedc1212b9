"""InferenceService adapters: plans, pods, KV-cache routing, request rates, admin view."""
