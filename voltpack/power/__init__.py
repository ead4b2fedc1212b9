"""Power mechanism: the power-domain tree, budget accounting, and the control loop that keeps
every domain under its budget (clock locks first, power caps as a backstop), failing safe when
telemetry is late or lost. The power policies themselves live in `voltpack.policies.power`."""
