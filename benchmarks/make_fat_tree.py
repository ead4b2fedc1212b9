"""Write the generated three-tier fat tree (topo.csv, topology.yaml, README.md).

The topology benchmark's second topology (issue 32), of another shape than Lingjun's; see
`voltpack/sim/traces/fat_tree.py` for the defaults and why. The same options give the same bytes.

Usage:
  python benchmarks/make_fat_tree.py                           # data/generated-fat-tree/
  python benchmarks/make_fat_tree.py --pods 8 --spine-oversubscription 2 --out /tmp/fat-tree
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from voltpack.model.errors import InvalidRequestError
from voltpack.sim.traces.fat_tree import DEFAULT_FOLDER, FatTreeShape, generate_fat_tree

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(FatTreeShape):
        default: Any = field.default
        parser.add_argument(
            f"--{field.name.replace('_', '-')}", type=type(default), default=default
        )
    parser.add_argument("--out", default=DEFAULT_FOLDER, help="folder, relative to the repo")
    args = parser.parse_args()
    values = {field.name: getattr(args, field.name) for field in dataclasses.fields(FatTreeShape)}
    try:
        shape = FatTreeShape(**values)
    except InvalidRequestError as exc:
        raise SystemExit(str(exc)) from None
    for path in generate_fat_tree(ROOT / args.out, shape, shown_folder=args.out):
        print(path)


if __name__ == "__main__":
    main()
