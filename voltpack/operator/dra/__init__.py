"""Dynamic Resource Allocation adapters: ResourceSlices and claims, allocation writes,
figures."""
