"""What limits where a pod may go: selectors, taints and tolerations, a pod's constraints, and
the nodes' side of them (labels, taints, resources, ports, placed pods) over the snapshot."""
