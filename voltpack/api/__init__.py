"""The admin REST API: cluster state, decisions, power, policies and what-if runs (FastAPI)."""
