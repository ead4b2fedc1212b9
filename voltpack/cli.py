"""The `voltpack` command."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from voltpack import __version__
from voltpack.forecast.default_model import DEFAULT_MODEL
from voltpack.model.errors import ForecastError, VoltpackError
from voltpack.sim.datasets import (
    DEFAULT_INVENTORY,
    INVENTORIES,
    OPENB_DEFAULT_PODS,
    OPENB_NODES,
    data_dir,
    fgd_paper_allocation_pct,
    inventory_nodes,
    openb_dir,
)
from voltpack.sim.traces.openb import load_nodes, load_pods
from voltpack.telemetry.faults import DEFAULT_XID_HOLD_S
from voltpack.telemetry.podresources import DEFAULT_SOCKET

if TYPE_CHECKING:
    from rich.progress import Progress

    from voltpack.forecast.series import TimeSeries
    from voltpack.operator.gpunode_sync import GpuNodeSync
    from voltpack.policies.schema import PolicyFile
    from voltpack.sim.experiment import ArrivalOrder
    from voltpack.sim.report import PolicySummary
    from voltpack.sim.runner import ExperimentPlan

# Each command imports what it runs when it runs: the operator, the API, the simulators and the
# forecasters together took 4-7 s to import, which every `voltpack --help`, every agent start
# and every operator restart paid (ruff's PLC0415 is waived for this file in pyproject.toml).

app = typer.Typer(help="voltpack: GPU-cluster scheduler and power manager.", no_args_is_help=True)
policy_app = typer.Typer(help="Policy files.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")
console = Console()
err_console = Console(stderr=True)

DEMO_POLICIES = (
    "random",
    "least-allocated",
    "dot-product",
    "gpu-clustering",
    "gpu-packing",
    "best-fit",
    "fgd-paper",
    "fgd",
)
"""Example policies (`voltpack/policies/examples/<name>.yaml`) that `voltpack demo` compares: the
FGD paper's baselines, the paper's FGD, and voltpack's shipped default (`fgd`) beside it."""


EXAMPLES_DIR = Path(__file__).resolve().parent / "policies" / "examples"
SCHEDULER_NAME_HELP = (
    "a schedulerName voltpack serves: the operator places its pods, the API counts them as "
    "voltpack's (repeatable; default: voltpack). Give '--scheduler-name voltpack "
    "--scheduler-name default-scheduler' to replace kube-scheduler"
)
"""Help of `--scheduler-name`, the same for `voltpack operator` and `voltpack api`."""
_ORDERS: dict[str, ArrivalOrder] = {"shuffle": "shuffle", "creation": "creation"}


def parse_seeds(text: str) -> tuple[int, ...]:
    """'42-51' -> 42..51; '1,5,9' -> 1, 5, 9; '7' -> 7."""
    seeds: list[int] = []
    try:
        for raw_part in text.split(","):
            part = raw_part.strip()
            if "-" in part[1:]:
                low, high = part.split("-", 1)
                if int(high) < int(low):
                    raise ValueError
                seeds.extend(range(int(low), int(high) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a seed list; write e.g. 42-51, 1,2,3 or 42"
        ) from None
    return tuple(seeds)


def _resolve_policy(spec: str) -> tuple[PolicyFile, str]:
    from voltpack.policies.registry import strategy_names
    from voltpack.policies.schema import example_policy_path, load_policy, policy_for_strategy

    path = Path(spec)
    if path.is_file():
        return load_policy(path), path.read_text(encoding="utf-8")
    if (EXAMPLES_DIR / f"{spec}.yaml").is_file():
        example = example_policy_path(spec)
        return load_policy(example), example.read_text(encoding="utf-8")
    if spec in strategy_names():
        policy = policy_for_strategy(spec)
        return policy, f"# built-in policy for strategy {spec}\n" + policy.model_dump_json(
            by_alias=True
        )
    raise VoltpackError(
        f"--policy {spec!r}: no such file, and not a strategy name; "
        f"strategy names: {', '.join(strategy_names())}"
    )


def _progress() -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def _summary_table(summaries: list[PolicySummary], workload: str, final_pct: int) -> Table:
    table = Table(title=f"GPU allocation at {final_pct}% arrived demand ({workload})")
    for column in ("policy", "allocation ratio", "FGD paper", "frag (% GPUs)", "failed pods"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for s in sorted(summaries, key=lambda item: item.allocation_ratio_pct_mean):
        anchor = fgd_paper_allocation_pct(workload, s.strategy, final_pct)
        table.add_row(
            s.policy,
            f"{s.allocation_ratio_pct_mean:.2f}% ± {s.allocation_ratio_pct_stdev:.2f}",
            f"{anchor:.2f}%" if anchor is not None else "-",
            f"{s.frag_amount_pct_mean:.2f}",
            f"{s.failed_pods_mean:.0f}",
        )
    return table


def _run_and_report(
    plan: ExperimentPlan, policy_texts: dict[str, str], out: Path, jobs: int
) -> None:
    from voltpack.sim.report import write_reports
    from voltpack.sim.runner import run_plan

    with _progress() as progress:
        task = progress.add_task("simulating", total=len(plan.policies) * len(plan.seeds))
        results = run_plan(plan, jobs=jobs, on_done=lambda _: progress.advance(task))
    summaries = write_reports(out, results, plan.config(), policy_texts)
    final_pct = round(plan.target_demand_ratio * 100)
    console.print(_summary_table(summaries, plan.pods_path.stem, final_pct))
    console.print(
        f"reports: {out / 'results.json'}, {out / 'summary.md'}, {out / 'allocation.png'}"
    )


def _default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 4))


@app.command()
def simulate(
    trace: Annotated[Path, typer.Option(help="openb-format pod list CSV")],
    policy: Annotated[
        list[str], typer.Option(help="policy file, or a strategy name; repeat for several")
    ],
    out: Annotated[Path, typer.Option(help="folder for results.json, summary.md, allocation.png")],
    nodes: Annotated[
        Path | None,
        typer.Option(help=f"node list CSV (default: {OPENB_NODES} beside the trace)"),
    ] = None,
    seeds: Annotated[str, typer.Option(help="seeds, e.g. 42-51")] = "42",
    ratio: Annotated[float, typer.Option(help="inflate arrived GPU demand to this share")] = 1.3,
    order: Annotated[str, typer.Option(help="arrival order: shuffle or creation")] = "shuffle",
    jobs: Annotated[int, typer.Option(help="parallel processes")] = 0,
) -> None:
    """Run the FGD experiment protocol on a trace for each policy and seed."""
    from voltpack.sim.runner import ExperimentPlan

    if order not in _ORDERS:
        raise typer.BadParameter(f"--order {order!r}: allowed values: shuffle, creation")
    if ratio <= 0:
        raise typer.BadParameter(f"--ratio {ratio}: must be positive")
    try:
        resolved = [_resolve_policy(p) for p in policy]
        plan = ExperimentPlan(
            nodes_path=nodes or trace.parent / OPENB_NODES,
            pods_path=trace,
            policies=tuple(p for p, _ in resolved),
            seeds=parse_seeds(seeds),
            target_demand_ratio=ratio,
            order=_ORDERS[order],
        )
        texts = {p.metadata.name: text for p, text in resolved}
        _run_and_report(plan, texts, out, jobs or _default_jobs())
    except VoltpackError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="folder for the reports")] = Path("out/demo"),
    seeds: Annotated[str, typer.Option(help="seeds")] = "42-44",
    jobs: Annotated[int, typer.Option(help="parallel processes")] = 0,
    cluster: Annotated[
        bool, typer.Option(help="also replay a trace slice through the emulator and operator")
    ] = True,
    replay_pods: Annotated[int, typer.Option(help="pods replayed through the API")] = 1500,
    replay_seconds: Annotated[float, typer.Option(help="wall time of the replay")] = 40.0,
) -> None:
    """Compare the strategies on openb (simulator), then run the operator live (emulator)."""
    from voltpack.policies.schema import example_policy_path, load_policy
    from voltpack.sim.runner import ExperimentPlan

    try:
        folder = openb_dir()
        policies = [load_policy(example_policy_path(name)) for name in DEMO_POLICIES]
        plan = ExperimentPlan(
            nodes_path=folder / OPENB_NODES,
            pods_path=folder / OPENB_DEFAULT_PODS,
            policies=tuple(policies),
            seeds=parse_seeds(seeds),
        )
        console.print(
            f"voltpack {__version__} demo: {len(policies)} strategies x {len(plan.seeds)} seeds "
            "on openb (1,213 nodes, 6,212 GPUs), demand inflated to 130% of GPU capacity"
        )
        texts = {
            name: example_policy_path(name).read_text(encoding="utf-8") for name in DEMO_POLICIES
        }
        _run_and_report(plan, texts, out, jobs or _default_jobs())
        if cluster:
            _live_cluster(folder, replay_pods, replay_seconds)
    except VoltpackError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None


def _live_cluster(folder: Path, pod_count: int, wall_s: float) -> None:
    from rich.live import Live

    from voltpack.live_demo import ClusterCounts, run_live_demo
    from voltpack.policies.schema import example_policy_path, load_policy

    nodes = load_nodes(folder / OPENB_NODES)
    trace = load_pods(folder / OPENB_DEFAULT_PODS)
    policy = load_policy(example_policy_path("fgd"))
    console.print(
        f"\n[bold]Live:[/bold] the operator (policy {policy.metadata.name}) on an emulated "
        f"openb cluster; {pod_count} trace pods and two 4x8-GPU GPUJobs replayed in "
        f"{wall_s:.0f} s"
    )

    def ready(url: str) -> None:
        console.print(f"  watch it: kubectl --server {url} get gpujobs,pods -A")

    def table(counts: ClusterCounts, created: int) -> Table:
        view = Table("created", "bound", "running", "succeeded", "pending", "GPUs in use", "jobs")
        view.add_row(
            str(created),
            str(counts.bound),
            str(counts.phases.get("Running", 0)),
            str(counts.phases.get("Succeeded", 0)),
            str(counts.phases.get("Pending", 0)),
            str(counts.gpus_in_use),
            ", ".join(f"{k}: {v}" for k, v in counts.jobs.items()) or "-",
        )
        return view

    with Live(console=console, refresh_per_second=4) as live:
        figures = run_live_demo(
            nodes,
            trace,
            policy,
            pod_count=pod_count,
            wall_s=wall_s,
            on_ready=ready,
            on_tick=lambda counts, created: live.update(table(counts, created)),
        )
    summary = Table("live replay", "value", title="Operator + emulator")
    for key, value in figures.items():
        summary.add_row(key.replace("_", " "), str(value))
    console.print()  # the live table ends without a newline: start the summary on its own line
    console.print(summary)


@policy_app.command("validate")
def policy_validate(file: Annotated[Path, typer.Argument(help="policy YAML file")]) -> None:
    """Check a policy file; print what is wrong, field by field."""
    from voltpack.policies.schema import load_policy

    try:
        policy = load_policy(file)
    except VoltpackError as exc:
        err_console.print(f"[red]invalid:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from None
    power = policy.spec.power
    allocation = policy.spec.allocation.policy or "off"
    console.print(
        f"{file}: valid ({policy.api_version}, strategy {policy.spec.scoring.strategy}, "
        f"power policy {power.policy}, {len(power.domains)} power domains in the file, "
        f"training allocation {allocation})"
    )


@policy_app.command("strategies")
def policy_strategies() -> None:
    """List the scoring strategies and power policies a policy file may name."""
    from voltpack.policies.fair_share import ordering_summaries
    from voltpack.policies.hetero.registry import allocation_policy_summaries
    from voltpack.policies.power.registry import power_policy_summaries
    from voltpack.policies.registry import strategy_summaries

    table = Table("strategy", "definition")
    for name, summary in strategy_summaries().items():
        table.add_row(name, summary)
    console.print(table)
    power = Table("power policy (spec.power.policy)", "definition")
    for name, summary in power_policy_summaries().items():
        power.add_row(name, summary)
    console.print(power)
    ordering = Table("queue ordering (spec.queueing.ordering)", "definition")
    for name, summary in ordering_summaries().items():
        ordering.add_row(name, summary)
    console.print(ordering)
    allocation = Table(
        "training allocation policy (spec.allocation.policy, simulate-training)", "definition"
    )
    for name, summary in allocation_policy_summaries().items():
        allocation.add_row(name, summary)
    console.print(allocation)


@app.command("simulate-training")
def simulate_training(
    trace: Annotated[Path, typer.Option(help="Gavel-format trace (physical_cluster or msr)")],
    policy: Annotated[
        list[str] | None,
        typer.Option(help="allocation policy; repeat (default: max_min_fairness_perf and ours)"),
    ] = None,
    cluster: Annotated[str, typer.Option(help="GPUs as V100:P100:K80")] = "8:8:8",
    round_s: Annotated[float, typer.Option(help="round length in seconds")] = 360.0,
    restart_cost_s: Annotated[float, typer.Option(help="checkpoint-restart cost")] = 0.0,
    throughputs: Annotated[
        Path | None, typer.Option(help="Gavel throughput JSON (default: the shipped one)")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed")] = 0,
) -> None:
    """Replay a training trace on a heterogeneous cluster with each allocation policy."""
    from voltpack.perf.throughput_table import load_gavel_throughputs
    from voltpack.policies.hetero.registry import make_allocation_policy
    from voltpack.sim.hetero import RoundConfig, RoundSimulator, parse_gavel_cluster, summarize
    from voltpack.sim.traces.gavel import load_gavel_trace

    policies = policy or ["max_min_fairness_perf", "shortest_remaining_perf"]
    if round_s <= 0 or restart_cost_s < 0:
        raise typer.BadParameter("--round-s must be > 0 and --restart-cost-s >= 0")
    try:
        gpus = parse_gavel_cluster(cluster)
        table = load_gavel_throughputs(
            throughputs or data_dir() / "gavel" / "simulation_throughputs.json"
        )
        jobs = load_gavel_trace(trace)
        config = RoundConfig(
            round_s=round_s, restart_cost_s=restart_cost_s, seed=seed, gavel_compatible=False
        )
        results = Table("policy", "avg JCT (s)", "p99 JCT (s)", "makespan (s)", "util", "preempt")
        for name in policies:
            simulator = RoundSimulator(make_allocation_policy(name, seed), table, gpus, config)
            figures = summarize(simulator.run(jobs))
            results.add_row(
                name,
                f"{figures['avg_jct_s']:,.0f}",
                f"{figures['p99_jct_s']:,.0f}",
                f"{figures['makespan_s']:,.0f}",
                f"{figures['utilization']:.3f}",
                f"{figures['preemptions']:.0f}",
            )
    except (VoltpackError, LookupError) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    console.print(results)


def _served_schedulers(names: list[str] | None) -> frozenset[str]:
    """The `--scheduler-name`s given, or the default (`voltpack` alone)."""
    from voltpack.operator.kube.conventions import SERVED_SCHEDULERS

    return frozenset(names) if names else SERVED_SCHEDULERS


@app.command()
def operator(
    server: Annotated[
        str | None, typer.Option(help="API server URL (default: in-cluster, then kubeconfig)")
    ] = None,
    policy: Annotated[str, typer.Option(help="policy file, example name or strategy")] = "fgd",
    identity: Annotated[
        str, typer.Option(help="this replica's name in the leader Lease")
    ] = f"{socket.gethostname()}-{os.getpid()}",
    namespace: Annotated[str, typer.Option(help="namespace of the leader Lease")] = (
        "voltpack-system"
    ),
    seed: Annotated[int, typer.Option(help="seed of the scheduling decisions")] = 0,
    lease_seconds: Annotated[int, typer.Option(help="leader Lease duration")] = 15,
    metrics_port: Annotated[int, typer.Option(help="Prometheus metrics port (-1: off)")] = 9411,
    power: Annotated[
        bool, typer.Option(help="run the power loop (PowerBudgets, GPUNode clocks and caps)")
    ] = True,
    database_url: Annotated[
        str | None,
        typer.Option(help="record decisions and power here (sqlite:///file.db, postgresql://...)"),
    ] = None,
    policy_configmap: Annotated[
        str, typer.Option(help="ConfigMap (in --namespace) whose policy.yaml replaces --policy")
    ] = "voltpack-policy",
    scheduler_name: Annotated[list[str] | None, typer.Option(help=SCHEDULER_NAME_HELP)] = None,
) -> None:
    """Run the operator: schedule pods and GPUJobs, manage power domains, report Events."""
    from voltpack.operator.kube.connect import api_client
    from voltpack.operator.runner import Operator, OperatorConfig

    try:
        resolved, _ = _resolve_policy(policy)
    except VoltpackError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    logging.basicConfig(
        level=os.environ.get("VOLTPACK_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # an unreachable API server is said once by the operator, not at each of urllib3's retries
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    config = OperatorConfig(
        policy=resolved,
        identity=identity,
        namespace=namespace,
        seed=seed,
        lease_duration_s=lease_seconds,
        metrics_port=None if metrics_port < 0 else metrics_port,
        power=power,
        database_url=database_url,
        policy_configmap=policy_configmap or None,
        scheduler_names=_served_schedulers(scheduler_name),
        freeze_heap=True,  # this process is the operator's alone
    )
    console.print(f"voltpack operator {identity}: policy {resolved.metadata.name}")
    Operator(api_client(server), config).run(stop)


@app.command()
def api(
    server: Annotated[
        str | None, typer.Option(help="API server URL (default: in-cluster, then kubeconfig)")
    ] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8080,
    token_file: Annotated[
        Path | None,
        typer.Option(help="static tokens (CSV token,user,role); default: TokenReview + RBAC"),
    ] = None,
    policy: Annotated[str, typer.Option(help="policy before one is applied")] = "fgd",
    namespace: Annotated[str, typer.Option(help="namespace of the policy ConfigMap")] = (
        "voltpack-system"
    ),
    database_url: Annotated[
        str | None,
        typer.Option(help="history database (the operator's --database-url); none: no history"),
    ] = None,
    policy_configmap: Annotated[
        str, typer.Option(help="ConfigMap (in --namespace) the applied policy is written to")
    ] = "voltpack-policy",
    max_body_bytes: Annotated[
        int | None,
        typer.Option(min=1024, help="larger request bodies get 413, unread (default 4 MiB)"),
    ] = None,
    scheduler_name: Annotated[list[str] | None, typer.Option(help=SCHEDULER_NAME_HELP)] = None,
) -> None:
    """Serve the admin REST API (OpenAPI at /docs and /openapi.json)."""
    import uvicorn

    from voltpack.api.app import ApiDependencies, create_app
    from voltpack.api.auth import KubernetesAuth, StaticTokens
    from voltpack.api.server import freeze_heap
    from voltpack.api.store_history import StoreHistory
    from voltpack.operator.admin.source import KubeAdminSource
    from voltpack.operator.inference.admin import KubeInferenceSource
    from voltpack.operator.kube.connect import api_client
    from voltpack.store import BufferedStore

    try:
        resolved, text = _resolve_policy(policy)
        client = api_client(server)
        auth: StaticTokens | KubernetesAuth = (
            StaticTokens.from_file(token_file) if token_file else KubernetesAuth(client)
        )
        # decisions, audit, power history and simulations; writes are buffered through outages
        history = StoreHistory(BufferedStore.open(database_url)) if database_url else None
    except VoltpackError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    source = KubeAdminSource(
        client,
        resolved,
        text,
        namespace=namespace,
        policy_configmap=policy_configmap,
        scheduler_names=_served_schedulers(scheduler_name),
    )
    source.start()  # list and watch from now on: the first request finds the caches filled
    inference = KubeInferenceSource(client)
    inference.start()

    # the first lists (millions of objects at 5,000 nodes) out of the collector's walks, once
    # they are in; an API server unreachable for an hour leaves them to the collector
    def freeze_once_synced() -> None:
        if source.wait_synced(3600.0):
            freeze_heap()

    threading.Thread(target=freeze_once_synced, name="freeze-after-sync", daemon=True).start()
    deps = ApiDependencies(
        cluster=source,
        policies=source,
        authenticator=auth,
        authorizer=auth,
        history=history,
        inference=inference,
    )
    if max_body_bytes is not None:
        deps.max_body_bytes = max_body_bytes
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    console.print(f"voltpack api on http://{host}:{port} (auth: {type(auth).__name__})")
    uvicorn.run(create_app(deps), host=host, port=port, log_level="info")


@app.command()
def emulator(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port (0: any free one)")] = 8001,
    inventory: Annotated[
        str,
        typer.Option(
            help="shipped cluster to serve: "
            + "; ".join(f"{name} ({what})" for name, what in INVENTORIES.items())
        ),
    ] = DEFAULT_INVENTORY,
    nodes: Annotated[
        Path | None,
        typer.Option(help="an openb-format node list to serve instead of --inventory"),
    ] = None,
    time_factor: Annotated[
        float, typer.Option(help="wall seconds per simulated second of pod run time")
    ] = 1.0,
    token_auth_file: Annotated[
        Path | None,
        typer.Option(
            help="static tokens that TokenReview accepts, as kube-apiserver's: CSV lines of "
            'token,user,uid,"group1,group2"'
        ),
    ] = None,
    insecure_bind: Annotated[
        bool,
        typer.Option(
            help="allow a --host other machines can reach (the emulator authenticates nothing)"
        ),
    ] = False,
) -> None:
    """Serve a Kubernetes-compatible API with simulated GPU nodes (for demos and tests)."""
    from voltpack.emulator import EmulatorConfig, EmulatorState, serve
    from voltpack.emulator.runner import check_bind, is_loopback

    try:
        check_bind(host, insecure_bind)
        if nodes is not None and inventory != DEFAULT_INVENTORY:
            raise VoltpackError(
                f"--nodes {nodes} and --inventory {inventory}: give one of them, not both"
            )
        node_list = load_nodes(nodes) if nodes is not None else inventory_nodes(inventory)
        config = EmulatorConfig(time_factor=time_factor, token_file=token_auth_file)
        state = EmulatorState(config, nodes=node_list)
    except (VoltpackError, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    if not is_loopback(host):
        err_console.print(
            f"[yellow]warning:[/yellow] serving on {escape(host)} without authentication "
            "(--insecure-bind)",
            soft_wrap=True,
        )
    serve(
        host,
        port,
        state=state,
        on_ready=lambda url: console.print(
            f"emulator with {len(node_list)} nodes at {url}\n  kubectl --server {url} get nodes"
        ),
    )


@app.command()
def agent(
    backend: Annotated[str, typer.Option(help="auto, nvml, amd or simulated")] = "auto",
    node_name: Annotated[str, typer.Option(help="node label on every metric")] = (
        socket.gethostname()
    ),
    host: Annotated[str, typer.Option(help="address of /metrics and /healthz")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="port of /metrics and /healthz")] = 9410,
    power_interval_s: Annotated[float, typer.Option(help="power sampling period")] = 1.0,
    full_interval_s: Annotated[float, typer.Option(help="full sampling period")] = 10.0,
    publish_interval_s: Annotated[
        float,
        typer.Option(
            help="GPUNode status period: the power manager's telemetry (keep it well under "
            "the policy's late_after_s)"
        ),
    ] = 2.0,
    dcgm_compat: Annotated[bool, typer.Option(help="also export dcgm-exporter names")] = False,
    simulated_model: Annotated[str, typer.Option(help="GPU model of --backend simulated")] = (
        "H100-SXM"
    ),
    simulated_gpus: Annotated[int, typer.Option(help="GPUs of --backend simulated")] = 8,
    publish: Annotated[
        bool, typer.Option(help="keep this node's GPUNode in step (status out, settings in)")
    ] = False,
    server: Annotated[
        str | None, typer.Option(help="API server for --publish (default: in-cluster)")
    ] = None,
    sysfs_root: Annotated[
        str, typer.Option(help="root of /sys for NIC and PCIe topology (a container mount)")
    ] = "/",
    pod_resources_socket: Annotated[
        str, typer.Option(help="kubelet pod-resources socket, for pod labels on GPU metrics")
    ] = DEFAULT_SOCKET,
    actuate: Annotated[
        bool,
        typer.Option(help="apply the GPUNode spec's power limits and clock locks (--publish)"),
    ] = True,
    xid_hold_s: Annotated[
        float,
        typer.Option(
            help="an XID (or NVLink error) fault clears after this many seconds without "
            "a repeat, or at a GPU reset",
            min=1.0,
        ),
    ] = DEFAULT_XID_HOLD_S,
) -> None:
    """Run the node agent: sample every GPU, serve Prometheus metrics and /healthz."""
    from kubernetes.client import CustomObjectsApi

    from voltpack.operator.gpunode_sync import GpuNodeSync
    from voltpack.operator.kube.connect import api_client
    from voltpack.telemetry.agent import run_agent
    from voltpack.telemetry.backends import open_backend
    from voltpack.telemetry.podresources.client import CachedPodMapping

    if backend not in ("auto", "nvml", "amd", "simulated"):
        raise typer.BadParameter(f"--backend {backend!r}: allowed: auto, nvml, amd, simulated")
    try:
        device = open_backend(
            backend,  # type: ignore[arg-type]
            simulated_model=simulated_model,
            simulated_gpus=simulated_gpus,
            xid_hold_s=xid_hold_s,
        )
    except VoltpackError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    console.print(f"voltpack agent ({device.vendor}) on {host}:{port} for node {node_name}")
    stop = threading.Event()
    if publish:
        sync = GpuNodeSync(
            CustomObjectsApi(api_client(server)),
            node_name,
            device,
            sysfs_root=sysfs_root,
            actuate=actuate,
        )
        threading.Thread(
            target=_publish_loop, args=(sync, publish_interval_s, stop), daemon=True
        ).start()
    run_agent(
        device,
        node_name,
        host,
        port,
        power_interval_s=power_interval_s,
        full_interval_s=full_interval_s,
        dcgm_compat=dcgm_compat,
        pod_mapping=CachedPodMapping(pod_resources_socket),
        stop_event=stop,
    )


def _publish_loop(sync: GpuNodeSync, interval_s: float, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            sync.reconcile_once()
        except Exception:  # the API may be away: log, retry next interval
            logging.getLogger("voltpack.agent").exception("GPUNode sync failed")
        stop.wait(interval_s)


@app.command()
def version() -> None:
    """Print voltpack's version."""
    console.print(__version__)


forecast_app = typer.Typer(
    help="Forecast demand and power from the shipped traces; plan GPUs and power headroom.",
    no_args_is_help=True,
)
app.add_typer(forecast_app, name="forecast")


def _forecast_targets(quick: bool) -> list[TimeSeries]:
    from voltpack.sim.forecast_targets import build_targets

    return build_targets(data_dir(), quick=quick)


@forecast_app.command("targets")
def forecast_targets(
    quick: Annotated[bool, typer.Option(help="the smaller set the smoke benchmark uses")] = False,
) -> None:
    """List the series built from the shipped traces (name, family, step, length)."""
    from voltpack.sim.forecast_targets.summary import target_rows

    table = Table("series", "family", "unit", "step", "samples", "days", "mean", "peak")
    for row in target_rows(_forecast_targets(quick)):
        mean, peak = row["mean"], row["peak"]
        table.add_row(
            str(row["name"]), str(row["family"]), str(row["unit"]), f"{row['step_s']:g} s",
            str(row["samples"]), str(row["span_days"]),
            "-" if mean is None else f"{mean:.4g}", "-" if peak is None else f"{peak:.4g}",
        )  # fmt: skip
    wide = Console()
    Console(width=max(wide.width, 150)).print(table)


@forecast_app.command("plan")
def forecast_plan(
    series: Annotated[str, typer.Argument(help="a series name from `voltpack forecast targets`")],
    model: Annotated[
        str, typer.Option(help="a forecaster name (default: the benchmark's best across families)")
    ] = DEFAULT_MODEL,
    horizon: Annotated[int, typer.Option(min=1, help="steps ahead")] = 36,
    risk: Annotated[float, typer.Option(help="accepted chance that demand exceeds the plan")] = 0.1,
    budget_w: Annotated[
        float | None, typer.Option(help="the domain's budget (power series)")
    ] = None,
    quick: Annotated[bool, typer.Option(help="build the smaller target set")] = False,
) -> None:
    """Forecast one series to its end + `horizon` and say what to do: GPUs to keep free (GPU
    demand) or the power headroom left under `--budget-w` (power)."""
    import numpy as np

    from voltpack.forecast.capacity import plan_capacity
    from voltpack.forecast.headroom import power_headroom
    from voltpack.forecast.registry import make_forecaster

    console = Console()
    try:
        by_name = {s.name: s for s in _forecast_targets(quick)}
        if series not in by_name:
            raise ForecastError(
                f"series: {series!r} is not a target; `voltpack forecast targets` lists them"
            )
        history = by_name[series]
        forecaster = make_forecaster(model)
        forecaster.fit_many([history])
        levels = sorted({0.1, 0.5, 0.9, 0.99, 1.0 - risk} - {1.0})
        (forecast,) = forecaster.predict_many(horizon, levels)
        if history.family == "gpu_demand":
            key = series.split("/")[2]
            gpu_model = "any-model" if key in ("all", "any") else key
            last = history.values[np.isfinite(history.values)]
            plan = plan_capacity(
                forecast, gpu_model, risk=risk, in_use_gpus=float(last[-1]) if last.size else None
            )
            console.print(escape(plan.explanation))
        elif history.family == "power":
            if budget_w is None:
                raise ForecastError("budget_w: a power series needs --budget-w (watts)")
            headroom = power_headroom(forecast, series, budget_w, level=1.0 - risk)
            console.print(escape(headroom.explanation))
        else:
            median, high = forecast.quantile(0.5), forecast.quantile(0.9)
            console.print(
                f"{escape(series)}: median {median.mean():.4g} {history.unit} over the next "
                f"{horizon} steps; 90% quantile up to {high.max():.4g}"
            )
        for note in forecast.notes:
            console.print(f"note: {escape(note)}")
    except VoltpackError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
