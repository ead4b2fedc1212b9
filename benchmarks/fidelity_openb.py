"""Fidelity: voltpack's baseline strategies against the FGD paper's own results on openb.

Goal (issue 2): on `openb_pod_list_default`, best-fit and random within 0.5 percentage points of
the paper's mean allocation ratio at 130% arrived demand (seeds 42-51). The same options as
`packing_openb.py`; by default the default trace and the paper's five baseline policies.
"""

from __future__ import annotations

import sys

from packing_openb import main

if __name__ == "__main__":
    main(
        ["--traces", "default", *sys.argv[1:]],
        default_policies="random,dot-product,gpu-clustering,gpu-packing,best-fit",
        default_name="fidelity_openb",
        title="Fidelity to the FGD paper (goal: best-fit and random within 0.5 pp on default)",
    )
