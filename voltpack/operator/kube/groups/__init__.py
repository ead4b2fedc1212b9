"""Gangs from the ecosystem's own markers: one small convention per workload kind (voltpack's
annotations, the Workload API, Kueue's, Volcano's and KAI's pod groups, LeaderWorkerSet,
JobSet, KubeRay), each mapping a pod to its group, minimum members, queue and owner, in the
manner of KAI's podgrouper (docs/workloads.md)."""
