"""The soak with faults on a real control plane (etcd + kube-apiserver + kwok): a restartable
plane, a fault-injecting proxy in front of the apiserver, simulated GPU agents, a workload of
pod groups and GPUJobs, a fault injector and invariant checkers. `benchmarks/soak.py` runs it
for minutes; `tests/integration/test_soak.py` runs a short version. See docs/soak.md."""
