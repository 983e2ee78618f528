"""The lab controller: the DynamoGraphDeployments on a local API server, run for real on loopback.

What the Dynamo operator does on a cluster, for the lab (docs/lab.md, "Through `pulumi up`", says
it in full): it watches every graph on the API server and runs each with the lab's graph runner
(`lab.graph.LabGraph`): the real Dynamo frontend with the graph's frontend command line, one per
frontend replica (behind the lab's pass-through when several), and one `dynamo.mocker` per worker
replica (`lab.deployed_graph`). It writes the graph's `Ready` condition from what runs, with
`observedGeneration` (`lab.deployed_graph.Phase`); restarts the graph when what it runs changes
(the frontend's command line, environment or replicas, the worker count or pod template, as the
operator rolls the workers) or its `spec.restart.id` is new; stops a deleted graph's processes; and makes the
frontend Service with the frontend's address (`lab.frontend_service`).

A dead process is not restarted (a pod's container would be): a graph that lost a worker measures
something else, so it stays not Ready until its object changes. Graphs start one at a time, in the
controller's thread; a change made meanwhile is acted on once that start ends.

    with GraphController(kubeconfig, WorkerMapping(mocker_args=...), run_root) as controller:
        ...   # `pulumi up` of a profile stack now ends once its graph serves
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from components.kubeconfig import api_client as kubeconfig_client
from components.names import frontend_service
from lab.deployed_graph import (
    DeployedGraph,
    Phase,
    UnrunnableGraph,
    WorkerMapping,
    graph_at,
    graph_status,
    read_graph,
)
from lab.frontend_service import (
    GROUP,
    VERSION,
    annotate_frontend_service,
    owns_frontend_service,
)
from lab.graph import LabGraph, LabGraphError

PLURAL = "dynamographdeployments"
POLL_SECONDS = 0.5
STOP_JOIN_MARGIN_SECONDS = 30.0
"""`stop` waits for the thread up to a graph's start-up time and this."""


@dataclass
class Managed:
    """One graph the controller runs: what it read last, its processes, and its status."""

    graph: DeployedGraph | None
    running: LabGraph | None = None
    phase: Phase = Phase.STARTING
    message: str = ""
    retry: bool = False
    """Start again at the next pass (its Service was in the way: it may be gone by then)."""
    written: tuple[Phase, str, int, str] | None = None
    """The status last written (phase, message, generation, restart id): written again only on a change."""


@dataclass
class GraphController:
    """See the module docstring. `mapping` says what stands in for every graph's workers; each
    graph runs in `run_root/<namespace>/<name>`."""

    kubeconfig: Path
    mapping: WorkerMapping
    run_root: Path
    say: Callable[[str], None] = print
    context: str | None = None
    managed: dict[str, Managed] = field(default_factory=dict)
    """By the graph's uid."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _starting: LabGraph | None = None
    """The graph whose start the controller's thread is in."""
    _api: Any = None
    _core: Any = None
    error: BaseException | None = None
    """What made the last pass fail, if it did (it is also said); None once one succeeds."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    """Orders `stop` against a start beginning, so that no graph starts once it is called."""

    def __enter__(self) -> Self:
        api_client = kubeconfig_client(self.kubeconfig, self.context)
        self._api = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)
        self._thread = threading.Thread(target=self._run, name="lab-controller", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the thread, then every graph's processes; each graph is marked not Ready. Every
        graph is stopped even when the API server no longer answers."""
        with self._lock:
            self._stop.set()
            starting = self._starting
        if starting is not None:  # its start then fails at once, instead of waiting to serve
            starting.stop()
        if self._thread is not None:
            timeout = self.mapping.startup_timeout_seconds + STOP_JOIN_MARGIN_SECONDS
            self._thread.join(timeout=timeout)
        for uid, managed in list(self.managed.items()):
            try:
                self._halt(managed)
                if managed.graph is not None:
                    managed.phase, managed.message = Phase.STOPPED, "the lab controller stopped"
                    self._write_status(managed)
            except Exception as error:  # noqa: BLE001 -- the processes are stopped all the same
                self.say(f"lab controller: stopping {uid}: {type(error).__name__}: {error}")
                if managed.running is not None:
                    managed.running.stop()
            self.managed.pop(uid, None)

    def reason(self, name: str) -> str | None:
        """Why the graph of that name (in whichever namespace) is not Ready: its status message;
        None when it is, or when the controller has not seen it."""
        for managed in list(self.managed.values()):
            graph = managed.graph
            if graph is not None and graph.name == name:
                return None if managed.phase is Phase.READY else managed.message
        return None

    def running(self, namespace: str, name: str) -> LabGraph | None:
        """The lab graph serving that object now, if any (for tests and the lab's checks)."""
        for managed in list(self.managed.values()):  # a copy: the thread adds and removes
            graph = managed.graph
            if graph is not None and (graph.namespace, graph.name) == (namespace, name):
                return managed.running
        return None

    def _run(self) -> None:
        """Reconcile until stopped; a pass that fails (the API server did not answer, say) is
        said once and tried again at the next."""
        said = ""
        while not self._stop.is_set():
            try:
                self.reconcile()
            except Exception as error:  # noqa: BLE001 -- said, kept, and tried again
                self.error = error
                message = f"lab controller: a pass failed: {type(error).__name__}: {error}"
                if message != said:
                    self.say(message)
                said = message
            else:
                self.error, said = None, ""
            self._stop.wait(POLL_SECONDS)

    def reconcile(self) -> None:
        """One pass: every graph on the API server brought to what its object says."""
        items = self._api.list_cluster_custom_object(GROUP, VERSION, PLURAL).get("items", [])
        # The deleted first: a graph made again under the same name takes its folder and Service.
        for uid in set(self.managed) - {item["metadata"]["uid"] for item in items}:
            managed = self.managed[uid]
            self._halt(managed)  # before it is let go: `running` says None once all are stopped
            del self.managed[uid]
            if managed.graph is not None:
                self.say(f"lab controller: {managed.graph.key} deleted; its processes stopped")
        for item in items:
            if self._stop.is_set():
                return
            self._reconcile_one(item["metadata"]["uid"], item)

    def _reconcile_one(self, uid: str, item: Mapping[str, Any]) -> None:
        managed = self.managed.setdefault(uid, Managed(graph=None))
        try:
            wanted = read_graph(item)
        except UnrunnableGraph as reason:
            self._halt(managed)
            managed.graph = graph_at(item["metadata"])
            managed.phase, managed.message = Phase.UNRUNNABLE, str(reason)
        else:
            if managed.graph is None or managed.retry or _restart_needed(managed.graph, wanted):
                try:
                    self._restart(managed, wanted)
                except BaseException:  # an API server that did not answer: the next pass retries
                    managed.retry = True
                    raise
            managed.graph = wanted
            self._notice_exits(managed)
        self._write_status(managed)

    def _restart(self, managed: Managed, wanted: DeployedGraph) -> None:
        self._halt(managed)
        managed.graph = wanted
        managed.retry = not owns_frontend_service(self._core, wanted)
        if managed.retry:
            managed.phase = Phase.START_FAILED
            managed.message = (
                f"a Service {frontend_service(wanted.name)} that this graph does not own exists in "
                f"{wanted.namespace}: the lab does not overwrite it; delete or rename it"
            )
            return
        managed.phase, managed.message = Phase.STARTING, "starting the frontend and mock workers"
        self._write_status(managed)
        run_dir = self.run_root / wanted.namespace / wanted.name
        graph = LabGraph(wanted.spec(self.mapping), run_dir)
        with self._lock:
            if self._stop.is_set():
                return
            self._starting = graph
        self.say(
            f"lab controller: {wanted.key} (generation {wanted.generation}): starting "
            f"`{' '.join(wanted.frontend.argv)}` and {wanted.workers} mock workers"
        )
        try:
            graph.start()
        except (LabGraphError, OSError) as error:  # a process that failed, a full disk
            graph.stop()
            managed.phase, managed.message = Phase.START_FAILED, str(error)
            self.say(f"lab controller: {wanted.key} did not start: {_first_line(error)}")
            return
        except BaseException:
            graph.stop()
            raise
        finally:
            with self._lock:
                self._starting = None
        if self._stop.is_set():  # stopped while it started: `stop` no longer sees it
            graph.stop()
            return
        managed.running = graph
        url = f"http://127.0.0.1:{graph.client_port}"
        annotate_frontend_service(self._core, wanted, url)
        managed.phase, managed.message = Phase.READY, f"the lab's frontend serves at {url}"
        self.say(f"lab controller: {wanted.key} serves at {url}")

    def _notice_exits(self, managed: Managed) -> None:
        graph = managed.running
        if graph is None or managed.phase is not Phase.READY:
            return
        exited = graph.exited()
        if exited:
            causes = ", ".join(f"{p.name} ({graph.exit_cause(p)})" for p in exited)
            managed.phase = Phase.PROCESS_EXITED
            managed.message = f"exited: {causes}; logs in {graph.run_dir / 'logs'}"
            self.say(f"lab controller: {managed.graph and managed.graph.key}: {managed.message}")

    def _halt(self, managed: Managed) -> None:
        if managed.running is not None:
            managed.running.stop()
            managed.running = None
            if managed.graph is not None:
                annotate_frontend_service(self._core, managed.graph, None)

    def _write_status(self, managed: Managed) -> None:
        graph = managed.graph
        if graph is None:
            return
        wanted = (managed.phase, managed.message, graph.generation, graph.restart_id)
        if managed.written == wanted:
            return
        status = graph_status(managed.phase, managed.message, graph.generation, graph.restart_id)
        try:
            self._api.patch_namespaced_custom_object_status(
                GROUP, VERSION, graph.namespace, PLURAL, graph.name, {"status": status}
            )
        except ApiException as error:
            if error.status != 404:  # 404: deleted meanwhile, nothing to write
                raise
            return
        managed.written = wanted


def _restart_needed(running: DeployedGraph, wanted: DeployedGraph) -> bool:
    fields = ("uid", "frontend", "frontends", "workers", "worker_template", "restart_id")
    return any(getattr(running, name) != getattr(wanted, name) for name in fields)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
