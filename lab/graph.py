"""The lab graph: real Dynamo frontends (one, or several behind a pass-through) and N mock-engine
workers on loopback.

The frontend gets exactly the routing arguments the cluster's DynamoGraphDeployment gets
(`components.routing.frontend_args`), so the lab exercises the cluster's routing. The workers are
`dynamo.mocker` processes: Dynamo's mock engine, which simulates prefill/decode timing and a
prefix (KV) cache on the CPU. One process per worker, like one pod per worker on the cluster: each
has its own runtime and /metrics port, so per-worker request counters can confirm the routing
independently of the frontend (`--num-workers N` in one process would save ~0.6 GiB but share one
runtime). No etcd and no NATS: discovery through files, requests over TCP, events over ZMQ, state
confined to the run directory (`lab.environment.dynamo_environment`).

    with LabGraph(GraphSpec(routing=routing_for("session-affinity", 300)), run_dir) as graph:
        outputs = graph.outputs   # the stack-output contract, also written to outputs.json

The lab controller's graphs (`lab/controller.py`) come from DynamoGraphDeployments: their spec
gives the frontend's command line as the object stores it (`FrontendCommand`), of which the lab
sets only where it listens (`listen_on`), and the model name the stack's outputs promise.

Over 300 lines: one graph runner, whose start, readiness wait, stop and log tails share the list
of its processes (the frontends' command line and the pass-through's start among them); the
direct path and the controller both run graphs with it.

Several frontends (`frontends`): the same command line each, on its own port, behind the
pass-through (`lab/pass_through.py`), which says how it gives each connection to one of them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import requests

from common import REPO_ROOT
from common.confined_paths import checked_folder, inside, remove_tree_inside, write_file
from common.input_files import MAX_STATE_BYTES, read_text
from common.ports import LOOPBACK, free_port
from components.contract import StackOutputs
from components.routing import Routing, frontend_args
from lab.environment import LOOPBACK_ONLY, MODEL_NAME, LabInstall, dynamo_environment
from stages.errors import StageFailed
from stages.incluster.exit_causes import exit_cause
from stages.incluster.processes import (
    GroupProcess,
    deferred_interrupts,
    groups_rss_bytes,
    start_group_process,
)

DEFAULT_WORKERS = 8
MAX_FRONTENDS = 4
MAX_WORKERS = 128
"""What one machine runs: each mock worker holds about 115 MiB and 4 ZMQ sockets (128: ~15 GiB)."""
DEFAULT_STARTUP_TIMEOUT_SECONDS = 90.0
POLL_SECONDS = 0.25
GRAPH_NAME_PREFIX = "cosmos3-nano-reasoner-lab"
PASS_THROUGH = Path(__file__).resolve().parent / "pass_through.py"
PASS_THROUGH_START_SECONDS = 10.0
PASS_THROUGH_POLL_SECONDS = 0.05


class LabGraphError(StageFailed):
    """The graph did not come up; the message carries the tail of the process logs."""


@dataclass(frozen=True)
class FrontendCommand:
    """A frontend's command line as a DynamoGraphDeployment's frontend container has it: its
    command and args as one argv, and its environment. The first word is looked up on a PATH that
    starts with the lab's Dynamo venv (as the frontend image's PATH finds its `python3`)."""

    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


def listen_on(argv: list[str], port: int) -> list[str]:
    """`argv` with the value of any --http-host or --http-port it gives replaced by 127.0.0.1 and
    `port` (the environment sets them otherwise): where the lab's frontend listens, and only that.
    An abbreviation counts (`--http-h`: the frontend's argparse takes any unambiguous prefix)."""
    values = {"--http-host": LOOPBACK, "--http-port": str(port)}
    result: list[str] = []
    value_of: str | None = None  # the option whose value is the next word
    for word in argv:
        given, equals, _ = word.partition("=")
        named = [name for name in values if len(given) > len("--http-") and name.startswith(given)]
        if value_of is not None:
            word, value_of = values[value_of], None
        elif named and equals:
            word = f"{given}={values[named[0]]}"
        elif named:
            value_of = named[0]
        result.append(word)
    return result


@dataclass(frozen=True)
class GraphSpec:
    """A graph to run: from the routing settings (the lab's direct path: `routing`), or from a
    deployed object (the controller: `frontend`, `name` and `served_model` as the object has
    them); exactly one of `routing` and `frontend`."""

    routing: Routing | None = None
    workers: int = DEFAULT_WORKERS
    install: LabInstall = field(default_factory=LabInstall)
    mocker_args: tuple[str, ...] = ()
    startup_timeout_seconds: float = DEFAULT_STARTUP_TIMEOUT_SECONDS
    pre_engine_delay_ms: float = 0.0
    """Wall-clock delay before each request reaches the frontend (`lab/pass_through.py`); 0: none."""
    frontends: int = 1
    frontend_hashing: bool = True
    """With several frontends: each connection to the one its session header hashes to (True), or
    to one at random (False)."""
    frontend: FrontendCommand | None = None
    name: str | None = None
    served_model: str = MODEL_NAME

    def __post_init__(self) -> None:
        if (self.routing is None) == (self.frontend is None):
            raise ValueError("a lab graph takes either its routing or a frontend command line")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"the lab runs 1 to {MAX_WORKERS} workers, got {self.workers}")
        if not 1 <= self.frontends <= MAX_FRONTENDS:
            raise ValueError(f"the lab runs 1 to {MAX_FRONTENDS} frontends, got {self.frontends}")
        if not 0 <= self.pre_engine_delay_ms < float("inf"):
            raise ValueError(f"a pre-engine delay is 0 or more ms, got {self.pre_engine_delay_ms}")

    @property
    def graph_name(self) -> str:
        if self.name is not None:
            return self.name
        assert self.routing is not None  # one of the two, by __post_init__
        return f"{GRAPH_NAME_PREFIX}-{self.routing.profile.value}"

    def frontend_argv(self, python: Path) -> list[str]:
        """The frontend's command line: the object's, or the direct path's from the routing."""
        if self.frontend is not None:
            return list(self.frontend.argv)
        assert self.routing is not None
        return [str(python), "-m", "dynamo.frontend", *frontend_args(self.routing)]


def lab_outputs(spec: GraphSpec, port: int) -> StackOutputs | None:
    """The stack-output contract for a lab graph, shaped like a cluster stack's outputs; None for
    a controller's graph (its stack has the outputs)."""
    if spec.routing is None:
        return None
    url = f"http://{LOOPBACK}:{port}"
    return StackOutputs(
        target="lab",
        namespace="lab",
        profile=spec.routing.profile,
        graph_name=spec.graph_name,
        frontend_service="lab-frontend",
        frontend_port=port,
        frontend_url=url,
        models_url=f"{url}/v1/models",
        served_model=spec.served_model,
        session_affinity_ttl_seconds=spec.routing.affinity_ttl_seconds,
        session_header=spec.routing.session_header,
        worker_replicas=spec.workers,
        worker_gpus=0,  # mock workers run on the CPU
        model_cache_claim=None,
        port_forward_command=None,
    )


class LabGraph:
    """Context manager: start the graph, wait until it serves, stop every process on exit."""

    def __init__(self, spec: GraphSpec, run_dir: Path) -> None:
        self.spec = spec
        # Checked before it is resolved: a link in the command's own folder is never followed.
        self.run_dir = checked_folder(run_dir).resolve()
        self.processes: list[GroupProcess] = []
        """The frontends, then the workers."""
        self.pass_through: GroupProcess | None = None
        self.worker_metrics_urls: list[str] = []
        self.frontend_ports: list[int] = []
        self.client_port = 0
        """Where clients reach the graph, once it serves (`publish`)."""
        self.outputs_path = self.run_dir / "outputs.json"
        self._outputs: StackOutputs | None = None

    @property
    def outputs(self) -> StackOutputs:
        if self._outputs is None:
            raise RuntimeError("the lab graph is not running")
        return self._outputs

    @property
    def pgids(self) -> list[int]:
        return [process.pgid for process in self._every_process()]

    def _every_process(self) -> list[GroupProcess]:
        return self.processes + ([self.pass_through] if self.pass_through else [])

    def rss_bytes(self) -> int:
        """Resident memory of every process of the graph right now."""
        return groups_rss_bytes(self.pgids)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        self.spec.install.require()
        # A run directory may be reused: registrations left by an earlier, killed graph would
        # count as workers of this one.
        for stale in ("discovery", "tmp"):
            remove_tree_inside(self.run_dir, stale)  # a link there is refused, never followed
        for sub in ("discovery", "home", "tmp", "logs"):
            inside(self.run_dir, sub).mkdir(parents=True, exist_ok=True)
        env = dynamo_environment(self.run_dir, os.environ)
        for index in range(self.spec.frontends):
            self._start_frontend(index, env)
        for index in range(self.spec.workers):
            self._start_worker(index, env)
        for port in self.frontend_ports:
            self._wait_until_serving(port)
        port = self.frontend_ports[0]  # the only one's, unless the pass-through is in front
        if self.spec.pre_engine_delay_ms or self.spec.frontends > 1:
            port = self._start_pass_through(env)
        self.publish(port)

    def publish(self, port: int) -> None:
        """The port clients use (`client_port`), in the outputs and outputs.json: the frontend's,
        the pass-through's, or a forward's in front of them (`lab up` in its own network
        namespace)."""
        self.client_port = port
        self._outputs = lab_outputs(self.spec, port)
        if self._outputs is not None:
            write_file(self.outputs_path, json.dumps(self._outputs.to_json_dict(), indent=2) + "\n")

    def stop(self) -> None:
        """Stop every process by its process group id: all asked at once, then each awaited.

        A second Ctrl-C or SIGTERM while stopping is held until every group is stopped."""
        with deferred_interrupts():
            every = self._every_process()
            for process in every:
                process.request_stop()
            for process in reversed(every):
                process.stop()
            self._outputs = None

    def _start_frontend(self, index: int, env: dict[str, str]) -> None:
        """A frontend, listening on 127.0.0.1 at a free port: the one thing set over what its
        command line and environment say (the arguments' own --http-host/--http-port too)."""
        port = free_port()
        self.frontend_ports.append(port)
        argv = listen_on(self.spec.frontend_argv(self.spec.install.dynamo_python), port)
        own_env = dict(self.spec.frontend.env) if self.spec.frontend else {}
        venv_bin = str(self.spec.install.dynamo_python.parent)
        path = f"{venv_bin}{os.pathsep}{env.get('PATH', os.defpath)}"
        listen = LOOPBACK_ONLY | {"DYN_HTTP_HOST": LOOPBACK, "DYN_HTTP_PORT": str(port)}
        name = "frontend" if index == 0 else f"frontend-{index}"
        self._spawn(name, argv, env | own_env | {"PATH": path} | listen)

    def _start_worker(self, index: int, env: dict[str, str]) -> None:
        metrics_port = free_port()  # below 32768: Dynamo's DYN_SYSTEM_PORT parser
        # Laid out by hand (formatter skipped): a command line, each option beside its value.
        argv = [
            str(self.spec.install.dynamo_python), "-m", "dynamo.mocker",
            "--model-path", str(self.spec.install.model_dir),
            "--model-name", self.spec.served_model,
            *self.spec.mocker_args,
        ]  # fmt: skip
        self._spawn(f"worker-{index}", argv, env | {"DYN_SYSTEM_PORT": str(metrics_port)})
        self.worker_metrics_urls.append(f"http://{LOOPBACK}:{metrics_port}/metrics")

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log_path = self.run_dir / "logs" / f"{name}.log"
        with deferred_interrupts():  # recorded before an interrupt can strike, so stop() sees it
            self.processes.append(start_group_process(name, argv, env, log_path, cwd=REPO_ROOT))

    def _start_pass_through(self, env: dict[str, str]) -> int:
        """The pass-through in front of the frontends; returns the port clients use instead."""
        port_file = self.run_dir / "tmp" / "pass-through.port"
        port_file.unlink(missing_ok=True)
        choice = "hash" if self.spec.frontend_hashing else "random"
        # Laid out by hand (formatter skipped): a command line, the interpreter and its flags, then
        # the pass-through's own arguments.
        argv = [
            sys.executable, "-S", "-E", "-B", str(PASS_THROUGH),
            str(port_file), f"{self.spec.pre_engine_delay_ms}", choice,
            *map(str, self.frontend_ports),
        ]  # fmt: skip
        log_path = self.run_dir / "logs" / "pass-through.log"
        with deferred_interrupts():  # recorded before an interrupt can strike, so stop() sees it
            self.pass_through = start_group_process("pass-through", argv, env, log_path, REPO_ROOT)
        deadline = time.monotonic() + PASS_THROUGH_START_SECONDS
        while not port_file.exists():
            if self.pass_through.exit_code() is not None or time.monotonic() > deadline:
                raise LabGraphError(
                    f"the lab's pass-through did not start\n---- {log_path} ----\n"
                    + self.pass_through.log_tail(15)
                )
            time.sleep(PASS_THROUGH_POLL_SECONDS)
        return int(read_text(port_file, "pass-through's port file", MAX_STATE_BYTES))

    def _wait_until_serving(self, port: int) -> None:
        """Until the frontend at `port` lists the model in /v1/models and all N workers' generate
        endpoints in /health."""
        base = f"http://{LOOPBACK}:{port}"
        deadline = time.monotonic() + self.spec.startup_timeout_seconds
        state = "no answer from the frontend yet"
        while time.monotonic() < deadline:
            self._fail_if_a_process_exited()
            try:
                models = requests.get(f"{base}/v1/models", timeout=2).json()
                health = requests.get(f"{base}/health", timeout=2).json()
            except (requests.RequestException, ValueError) as error:
                state = f"frontend not answering ({type(error).__name__})"
            else:
                listed = self.spec.served_model in {m.get("id") for m in models.get("data", [])}
                workers = registered_workers(health)
                if listed and workers == self.spec.workers:
                    return
                state = f"model listed: {listed}, workers registered: {workers}/{self.spec.workers}"
            time.sleep(POLL_SECONDS)
        raise LabGraphError(
            f"lab graph not ready after {self.spec.startup_timeout_seconds:.0f} s ({state})\n"
            + self.log_tails()
        )

    def exited(self) -> list[GroupProcess]:
        """The graph's processes that are no longer running (the frontend is the first, the
        pass-through in front of several frontends the last)."""
        return [p for p in self._every_process() if p.exit_code() is not None]

    def exit_cause(self, process: GroupProcess) -> str:
        """Why a process of the graph ended: its status, a full disk, what its log says."""
        return exit_cause(process.exit_code(), process.log_tail(40), self.run_dir)

    def _fail_if_a_process_exited(self) -> None:
        exited = self.exited()
        if exited:
            names = ", ".join(f"{p.name} ({self.exit_cause(p)})" for p in exited)
            raise LabGraphError(f"lab process exited during start-up: {names}\n" + self.log_tails())

    def log_tails(self) -> str:
        # The frontend and the first crashed worker (else the first worker) tell the story.
        workers = self.processes[self.spec.frontends :]
        crashed = [p for p in workers if p.exit_code() is not None]
        shown = self.processes[:1] + (crashed or workers)[:1]
        return "\n".join(f"---- {p.log_path} ----\n{p.log_tail(15)}" for p in shown)


def registered_workers(health: Mapping[str, object]) -> int:
    """Distinct workers that registered a `generate` endpoint, from the frontend's /health."""
    instances = health.get("instances", [])
    if not isinstance(instances, list):
        return 0
    return len(
        {
            i.get("instance_id")
            for i in instances
            if isinstance(i, dict) and i.get("endpoint") == "generate"
        }
    )
