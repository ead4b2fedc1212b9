"""The emulator's HTTP face: routes, watch streams, discovery, tables, protobuf, the aggregated
API."""
