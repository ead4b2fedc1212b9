"""GPU telemetry: device backends behind one protocol, topology, the node agent, the exporter."""
