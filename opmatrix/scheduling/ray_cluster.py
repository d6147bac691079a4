"""Cells as Ray tasks, routed by device: an embedded local Ray by default, an existing cluster when given.

Each cell is one Ray task that asks for its device's custom resource (and one GPU), so it runs only on a node
that has the device; there it builds the cell's nox environment and puts each result on a Ray queue the moment it
is produced. The driver `ray.wait`s on the queue and on the cell tasks together and stores results as they
arrive. (A queue rather than a generator task: Ray Client, behind `ray://` addresses, has no generator tasks.)
The queue actor lives on the head node, so losing a GPU node never loses the stream.

- A device no live node offers: `no_host` rows at once, before anything is submitted (a task for a resource
  no node has would be accepted and pend forever). A device with driver / runtime ranges runs only on the nodes
  whose facts lie in them (a label selector: opmatrix.scheduling.fleet).
- A node lost mid-cell: the jobs that have not reported are resubmitted to another node with the same device
  if the cluster still has one, else recorded as `lost`. Results already streamed are kept either way.

Ray's own log lines (its token-authentication warnings, "Started a local Ray instance") stay out of the user's
terminal unless asked for (`opmatrix run --verbose`, or OPMATRIX_RAY_VERBOSE=1): only its errors show. An embedded
Ray authenticates with a token of this process's own, handed to its processes in the environment; Ray would
otherwise write one to ~/.ray/auth_token and keep it there.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass, field
from typing import Iterator
from urllib.parse import urlsplit

import ray
from ray.exceptions import RayError, RayTaskError
from ray.util.queue import Queue

from opmatrix import interrupts, paths
from opmatrix.cellenv.launch import run_cell_in_env
from opmatrix.core import status
from opmatrix.core.jobs import CellPlan, JobSpec, Mode
from opmatrix.core.result import Result
from opmatrix.scheduling import fleet, hosts, resources
from opmatrix.scheduling.dispatch import SchedulerError, compile_plan, no_host_reason, no_host_rows

MAX_ATTEMPTS = 3
STARTED = "started"
NOW = "now"  # what a cell is doing between two results (opmatrix.incell.cell_runner NOW_PREFIX)
HEAD_RESOURCE = "node:__internal_head__"  # every Ray head node has it
CONNECT_TIMEOUT_S = 5.0
VERBOSE_ENV = "OPMATRIX_RAY_VERBOSE"  # "1": Ray's own log lines (info and warnings) in the terminal too
TOKEN_ENV = "RAY_AUTH_TOKEN"  # Ray reads a token here before its files (RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token)
POLL_S = 0.2  # the driver waits on Ray at most this long at a time, then looks for a Ctrl-C / SIGTERM


@ray.remote(max_retries=0)
def cell_task(plan_json: str, queue: Queue, tag: int) -> int:
    """Runs on the node Ray chose: puts a 'started' event, then one JSON result per job with 'now' events (what
    the cell is doing) between them; returns how many items it put."""
    node = ray.get_runtime_context().get_node_id()
    plan = CellPlan.from_json(plan_json)
    plan = plan.replace(gpu_index=",".join(str(g) for g in ray.get_gpu_ids()))
    queue.put((tag, json.dumps({"event": STARTED, "node": node, "host": socket.gethostname(),
                                "gpu": plan.gpu_index})))
    if plan.cell.device.vendor == "cpu":
        os.environ.pop("OMP_NUM_THREADS", None)  # Ray pins it to the task's CPU count; a CPU cell owns the host
    sent = 1

    def now(text: str) -> None:
        nonlocal sent
        queue.put((tag, json.dumps({"event": NOW, "text": text})))
        sent += 1

    for result in run_cell_in_env(plan, on_now=now):
        result.node = node
        queue.put((tag, result.to_json()))
        sent += 1
    return sent


@dataclass
class CellRun:
    plan: CellPlan
    resource: str
    attempt: int = 1
    selector: dict = field(default_factory=dict)  # Ray label selector: the nodes inside the device's fact ranges
    done: set = field(default_factory=set)
    received: int = 0  # queue items taken for this attempt
    sent: int | None = None  # queue items the task says it put (known once it returned)

    def remaining(self) -> list[JobSpec]:
        return [j for j in self.plan.all_jobs() if self.plan.key(j) not in self.done]


def route(matrix_devices: list, nodes: list[dict]) -> dict[str, str]:
    """Matrix device id -> the custom resource a cell of that device asks for (absent: no live node has it)."""
    totals = resources.cluster_devices(nodes)
    offered = fleet.offered(nodes)  # each node's devices with its host facts (driver, runtime)
    assigned = hosts.resolve(matrix_devices, list(offered))
    return {dev: max((offered[hd] for hd in hds), key=lambda name: totals[name]) for dev, hds in assigned.items()}


def task_options(plan: CellPlan, resource: str, host_tokens: bool, selector: dict | None = None) -> dict:
    """Ray options for a cell task: its device resource and one GPU when it runs on one; compile-only cells need
    neither. With host tokens a CPU timing cell holds its host alone; the others share it. A selector (the nodes
    inside the device's driver / runtime ranges) becomes the task's label selector."""
    compile_only = plan.mode is Mode.COMPILE
    gpu = plan.cell.device.vendor != "cpu" and not compile_only
    needs = {} if compile_only else {resource: 1}
    if host_tokens:
        needs[resources.HOST] = resources.SHARED if gpu or compile_only else 1.0
    options = {"num_cpus": 1, "num_gpus": 1 if gpu else 0, "resources": needs}
    if selector and not compile_only:
        options["label_selector"] = dict(selector)
    return options


def after_loss(run: CellRun, alive: dict[str, float], error: str) -> tuple[CellRun | None, str]:
    """A cell's node went away: (the retry to submit, "") or (None, why its remaining jobs are lost)."""
    if alive.get(run.resource, 0) > 0 and run.attempt < MAX_ATTEMPTS:
        return CellRun(run.plan.with_jobs(run.remaining()), run.resource, run.attempt + 1, run.selector), ""
    if alive.get(run.resource, 0) == 0:
        return None, (f"the node running this cell was lost ({error}) and no other live node offers "
                      f"{run.resource}")
    return None, f"the cell was lost {run.attempt} times ({error}); giving up"


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + an empty SETTINGS frame
SETTINGS_FRAME = 4


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail within seconds, not after Ray's minutes of retries, when a cluster address does not answer, or answers
    but is not Ray: both Ray's GCS (host:6379) and its client server (ray://host:10001) are gRPC servers, which
    answer an HTTP/2 connection preface with a SETTINGS frame at once; a plain TCP listener, a web server or a
    database does not. (With RAY_USE_TLS set the exchange is encrypted: only the TCP connection is checked.)"""
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    if not parts.hostname or not parts.port:
        raise SchedulerError(f"Ray address {address!r} needs host:port (ray://host:10001 or host:6379)")
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("0", "", "false"):
                conn.sendall(HTTP2_PREFACE)
                first = _read(conn, 9, time.monotonic() + timeout_s)
                if len(first) < 9 or first[3] != SETTINGS_FRAME:
                    got = "nothing" if not first else f"{len(first)} byte(s) that are not HTTP/2: {first[:16]!r}"
                    raise SchedulerError(
                        f"{address} accepts TCP connections but is not a Ray cluster: a gRPC server answers at once, "
                        f"it answered {got} within {timeout_s:g} s. Give the address of the Ray head (host:6379, or "
                        "ray://host:10001 for Ray Client), or leave --address / RAY_ADDRESS out to run on an "
                        "embedded local Ray")
    except OSError as exc:
        raise SchedulerError(f"Ray cluster {address} does not answer ({exc}) within {timeout_s:g} s: start it, "
                             "fix --address / RAY_ADDRESS, or leave both out to run on an embedded local Ray")


def _read(conn: socket.socket, n: int, deadline: float) -> bytes:
    """Up to n bytes before the deadline (fewer when the peer closes or stays silent)."""
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        conn.settimeout(left)
        try:
            chunk = conn.recv(n - len(data))
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


def log_level(verbose: bool = False) -> int:
    """The level of Ray's own logger in the driver: its errors only, unless asked for (--verbose or
    OPMATRIX_RAY_VERBOSE=1)."""
    asked = verbose or os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return logging.INFO if asked else logging.ERROR


def embedded_token() -> None:
    """An embedded Ray's authentication token, never a file under $HOME: Ray >= 2.59 turns token authentication on
    for a local cluster and, finding no token, writes a new one to ~/.ray/auth_token for good. A token of this
    process's own in RAY_AUTH_TOKEN (read before any file, inherited by the cluster's processes) stands in; one run
    after another in one process keeps it (Ray's driver holds the first it read). A token the user gives
    (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH) or RAY_AUTH_MODE=disabled is left as it is."""
    if os.environ.get(TOKEN_ENV) or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "disabled":
        return
    os.environ[TOKEN_ENV] = secrets.token_hex(32)


class RayScheduler:
    """Connects to a cluster (address or RAY_ADDRESS) or starts an embedded one advertising this host."""

    def __init__(self, address: str | None = None, num_gpus: int | None = None, verbose: bool = False) -> None:
        self.address = address or os.environ.get("RAY_ADDRESS")
        if self.address:
            check_reachable(self.address)  # before any run folder exists
        self.num_gpus = num_gpus
        self.verbose = verbose
        self.embedded = False
        self.tags = itertools.count()

    def __enter__(self) -> RayScheduler:
        """Ray starts with signals deferred and our handlers kept (ray.init installs its own for SIGTERM); a
        signal that came meanwhile is raised once Ray is up, after it is shut down again."""
        with interrupts.deferred(), interrupts.handlers_kept():
            self._init()
        try:
            interrupts.check()
        except interrupts.Interrupted:
            self.__exit__()
            raise
        return self

    def _init(self) -> None:
        pythonpath = os.pathsep.join(str(p) for p in (paths.CHECKOUT, os.environ.get("PYTHONPATH")) if p)
        runtime_env = {"env_vars": {"PYTHONPATH": pythonpath, paths.ROOT_ENV: str(paths.ROOT)}}
        if self.address:
            try:
                ray.init(address=self.address, runtime_env=runtime_env, log_to_driver=False,
                         logging_level=log_level(self.verbose))
            except (ConnectionError, RuntimeError, TimeoutError) as exc:  # answered gRPC, yet Ray would not connect
                raise SchedulerError(f"cannot connect to the Ray cluster {self.address}: {exc}; check --address / "
                                     "RAY_ADDRESS, or leave both out to run on an embedded local Ray") from None
            return
        local = hosts.detect_local()
        gpus = [d for d in local if d.vendor != "cpu"]
        if self.num_gpus is not None:
            gpus = gpus[: self.num_gpus]
        advertised = [d for d in local if d.vendor == "cpu"] + gpus
        embedded_token()
        # address="local": always a fresh instance of our own, even when another Ray runs on this machine
        ray.init(address="local", num_cpus=os.cpu_count(), num_gpus=len(gpus),
                 resources=resources.host_resources(advertised), labels=resources.host_labels(advertised),
                 include_dashboard=False, runtime_env=runtime_env, log_to_driver=False,
                 logging_level=log_level(self.verbose))
        self.embedded = True

    def __exit__(self, *exc) -> None:
        with interrupts.deferred(), interrupts.handlers_kept():
            ray.shutdown()

    def describe(self) -> str:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        offered = ", ".join(f"{name.removeprefix(resources.PREFIX)} x{amount:g}"
                            for name, amount in sorted(resources.cluster_devices(alive).items()))
        kind = "embedded local Ray" if self.embedded else f"Ray cluster {self.address}"
        return f"{kind}: {len(alive)} node(s); devices: {offered or 'none advertised'}"

    def run(self, plans: list[CellPlan], matrix_devices: list, progress) -> Iterator[Result]:
        """Results as they arrive. Signals are deferred while this generator is open (every Ray call checks for
        them itself, and an exception raised inside one surfaces as Ray's SystemError): the loop raises a Ctrl-C or
        SIGTERM at its next turn, at most POLL_S later."""
        with interrupts.deferred():
            yield from self._run(plans, matrix_devices, progress)
        interrupts.check()  # one that came while the last results were stored

    def _run(self, plans: list[CellPlan], matrix_devices: list, progress) -> Iterator[Result]:
        nodes = ray.nodes()
        routes = route(matrix_devices, nodes)
        self.queue = Queue(actor_options={"num_cpus": 0, "resources": {HEAD_RESOURCE: 0.001}})
        selectors = fleet.selectors(matrix_devices, nodes)
        self.runs: dict[int, CellRun] = {}
        self.tasks: dict = {}  # task ref -> tag
        offered = resources.cluster_devices(nodes)
        self.host_tokens = resources.HOST in offered  # hosts started with `opmatrix host-resources` have them
        cpu_nodes = {name: n for name, n in offered.items() if name.startswith(resources.PREFIX + "cpu.")}
        for plan in plans:
            device = plan.cell.device
            compile_only = compile_plan(plan) if device.id not in routes else None
            if compile_only and cpu_nodes:  # build for the missing device on a CPU, never run
                self._submit(CellRun(compile_only, max(cpu_nodes, key=cpu_nodes.get)))
                continue
            if device.id not in routes:
                yield from no_host_rows(plan, no_host_reason(plan, self.describe(), "no node of the Ray cluster"))
                progress.finished(plan.cell.id)
                continue
            self._submit(CellRun(plan, routes[device.id], selector=selectors.get(device.id, {})))
        try:
            yield from self._stream(progress)
        finally:
            ray.kill(self.queue.actor)

    def _stream(self, progress) -> Iterator[Result]:
        take = self.queue.actor.get.remote()
        while self.runs:
            interrupts.check()
            done, _ = ray.wait([take, *self.tasks], num_returns=1, timeout=POLL_S)
            if not done:
                continue
            ready = done[0]
            if ready == take:
                item = ray.get(take)
                take = self.queue.actor.get.remote()
                yield from self._item(item, progress)
                continue
            tag = self.tasks.pop(ready)
            run = self.runs[tag]
            try:
                run.sent = ray.get(ready)
            except RayError as exc:
                # Items the task put before it failed may still be queued: take them first.
                for _ in range(ray.get(self.queue.actor.qsize.remote())):
                    item = ray.get(take)
                    take = self.queue.actor.get.remote()
                    yield from self._item(item, progress)
                del self.runs[tag]
                if isinstance(exc, RayTaskError):  # our own code failed inside the task: report, no retry
                    yield from self._rows(run, status.ENV_ERROR, f"cell task failed: {exc}")
                    progress.finished(run.plan.cell.id)
                else:  # the node, its worker or the object store went away
                    yield from self._recover(run, exc, progress)
                continue
            self._maybe_finished(tag, progress)

    def _item(self, item: tuple, progress) -> Iterator[Result]:
        tag, text = item
        run = self.runs.get(tag)
        payload = json.loads(text)
        if run is not None:
            run.received += 1
        if payload.get("event") == STARTED:
            if run is not None:
                progress.started(run.plan.cell.id, f"{payload['host']} node {payload['node'][:8]}"
                                 + (f" gpu {payload['gpu']}" if payload["gpu"] else ""))
            return
        if payload.get("event") == NOW:
            if run is not None:
                progress.working(run.plan.cell.id, payload["text"])
            return
        result = Result.from_dict(payload)
        if run is not None:
            run.done.add(result.key())
        yield result
        if run is not None:
            self._maybe_finished(tag, progress)

    def _maybe_finished(self, tag: int, progress) -> None:
        run = self.runs.get(tag)
        if run is not None and run.sent is not None and run.received >= run.sent:
            del self.runs[tag]
            progress.finished(run.plan.cell.id)

    def _submit(self, run: CellRun) -> None:
        tag = next(self.tags)
        self.runs[tag] = run
        ref = cell_task.options(**task_options(run.plan, run.resource, self.host_tokens, run.selector)).remote(
            run.plan.to_json(), self.queue, tag)
        self.tasks[ref] = tag

    def _recover(self, run: CellRun, exc: Exception, progress) -> Iterator[Result]:
        cell = run.plan.cell.id
        if not run.remaining():
            progress.finished(cell)
            return
        retry, why = after_loss(run, fleet.alive_devices(ray.nodes(), run.selector), type(exc).__name__)
        if retry is not None:
            self._submit(retry)
            progress.note(f"{cell}: {type(exc).__name__}; {len(retry.plan.all_jobs())} job(s) resubmitted "
                          f"(attempt {retry.attempt})")
            return
        yield from self._rows(run, status.LOST, why)
        progress.finished(cell)

    @staticmethod
    def _rows(run: CellRun, status_: str, error: str) -> Iterator[Result]:
        for job in run.remaining():
            yield run.plan.row(job, status_, error)
