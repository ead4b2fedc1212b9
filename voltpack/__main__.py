"""`python -m voltpack` runs the command-line interface."""

from voltpack.cli import app

app()
