"""Dynamic Resource Allocation in the emulator: the claim controller, the kubelet's prepare
step, ResourceSlices, validation."""
