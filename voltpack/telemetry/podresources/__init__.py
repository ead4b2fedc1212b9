"""The kubelet's pod-resources API (v1): which pod holds which GPU.

`api.proto` is the kubelet's service definition; `api_pb2*.py` are generated from it by
`regenerate.py`; `client.py` is what the agent uses.
"""

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
"""Where the kubelet serves the pod-resources API."""
