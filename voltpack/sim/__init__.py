"""The discrete-event simulator, trace loaders, the experiment protocol and reports."""
