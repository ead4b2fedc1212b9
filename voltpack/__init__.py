"""voltpack: a Kubernetes-native scheduler and power manager for GPU clusters."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("voltpack")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
