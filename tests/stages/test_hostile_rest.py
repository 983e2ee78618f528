"""`python -m stages` against the rest of issue 30's hostile input, each case counted
(`tests.tally`, families `rest: ...`):

- no cluster nobody named: outputs without `kubeContext` and no `--context` never reach the
  kubeconfig's current context (a canary API server counts every connection made to it);
- a malformed kubeconfig ends with a message naming it, never a traceback;
- a dry run refuses what the API server or the pod would (a namespace that is no RFC 1123 label,
  a frontend URL that is not http(s), a port outside 1-65535), and accepts the edges;
- bucket names are checked against S3's rules before any request;
- control characters given as input never reach the terminal raw;
- `ab --stacks` is checked before anything is deployed.
"""

from __future__ import annotations

import argparse
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from components.routing import RoutingProfile
from lab.frontend_service import published_frontend_url
from lab.graph import LabGraphError
from stages import cli
from stages.ab.cluster_target import ClusterAbTarget
from stages.ab.pulumi_stacks import DeployError
from stages.archive.records import RunRecord, Stage
from stages.cluster.run import ClusterOptions, run_cluster_perf, run_cluster_smoke
from stages.core.workload import RECIPE_WORKLOAD
from stages.errors import EXIT_STATUSES, EXIT_USAGE, ClusterUnreachable, UsageError
from tests.stages.cluster.fakes import FakeCluster, cluster_outputs
from tests.stages.support import FIXTURES
from tests.support import LOCAL_TOOLS
from tests.tally import record, run_command

STATUSES = {code for code, _ in EXIT_STATUSES}
SLOW = pytest.mark.slow
"""The generated cases: seconds each, left to `make test` like the other hostile suites."""
PROPERTIES = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def stages_main(argv: list[str]) -> int:
    return cli.main(argv, local=LOCAL_TOOLS)


def outputs_file(folder: Path, name: str = "outputs.json", **changes: Any) -> Path:
    """The round-robin stack's outputs with `changes` (None removes a key), as a file."""
    data = cluster_outputs(RoutingProfile.ROUND_ROBIN).to_json_dict() | changes
    path = folder / name
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    return path


def printable(text: str) -> bool:
    """No control or invisible character but the newline: nothing a terminal would act on."""
    return all(c.isprintable() or c == "\n" for c in text)


# --- no cluster nobody named -------------------------------------------------------------------


class CountingServer(http.server.ThreadingHTTPServer):
    """An API server stand-in on loopback that counts the connections made to it and refuses
    every request (403, as an API server refuses a user without rights)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Refusing)
        self.connections = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections += 1
        super().process_request(request, client_address)


class _Refusing(http.server.BaseHTTPRequestHandler):
    def _refuse(self) -> None:
        body = json.dumps({"kind": "Status", "message": "forbidden", "code": 403}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _refuse

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving() -> Iterator[CountingServer]:
    server = CountingServer()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Clusters:
    """Two API servers in one kubeconfig: `canary`, its current context, which nobody names, and
    `named`, the context the outputs or --context name."""

    kubeconfig: Path
    canary: CountingServer
    named: CountingServer


def kubeconfig_text(canary_port: int, named_port: int) -> str:
    clusters = "".join(
        f"- name: {name}\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\n"
        for name, port in (("canary", canary_port), ("named", named_port))
    )
    contexts = "".join(
        f"- name: {name}\n  context: {{cluster: {name}, user: u, namespace: default}}\n"
        for name in ("canary", "named")
    )
    users = "- name: u\n  user: {token: not-a-real-token}\n"
    return (
        f"apiVersion: v1\nkind: Config\ncurrent-context: canary\nclusters:\n{clusters}"
        f"contexts:\n{contexts}users:\n{users}"
    )


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Clusters]:
    with serving() as canary, serving() as named:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(kubeconfig_text(canary.server_address[1], named.server_address[1]))
        yield Clusters(kubeconfig, canary, named)


CONTEXT_CASES = [
    # (the outputs' kubeContext, --context): None is no key / no option
    (None, None),
    ("", None),
    (None, "named"),
    ("named", None),
    ("named", "named"),
    ("", "named"),
]


@pytest.mark.parametrize("stage", ["smoke", "perf"])
@pytest.mark.parametrize("kubeconfig_from", ["--kubeconfig", "$KUBECONFIG"])
@pytest.mark.parametrize(("outputs_context", "option"), CONTEXT_CASES)
def test_a_stage_connects_only_to_the_context_it_is_told(
    clusters: Clusters,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stage: str,
    kubeconfig_from: str,
    outputs_context: str | None,
    option: str | None,
) -> None:
    outputs = outputs_file(tmp_path, kubeContext=outputs_context)
    argv = [stage, "--outputs", str(outputs), "--start-timeout=1", "--timeout=1"]
    argv += ["--out", str(tmp_path / "perf")] if stage == "perf" else []
    argv += ["--videos=1", "--questions=1", "--concurrency=1"] if stage == "perf" else []
    argv += [f"--context={option}"] if option is not None else []
    if kubeconfig_from == "--kubeconfig":
        argv.append(f"--kubeconfig={clusters.kubeconfig}")
    else:
        monkeypatch.setenv("KUBECONFIG", str(clusters.kubeconfig))

    status, _out, err = run_command("rest: context", stages_main, argv)

    assert clusters.canary.connections == 0, err
    if not (outputs_context or option):
        assert status == EXIT_USAGE and "no kubeContext" in err and "--context" in err, err
        assert clusters.named.connections == 0
        assert not (tmp_path / "perf").exists()  # refused before anything was written
    else:  # it reached the named cluster, which refused it
        assert status == ClusterUnreachable.exit_status, err
        assert clusters.named.connections > 0


@pytest.mark.parametrize("run", [run_cluster_smoke, run_cluster_perf])
def test_the_fake_cluster_seam_sees_nothing_without_a_named_context(
    tmp_path: Path, run: Any
) -> None:
    outputs = cluster_outputs(RoutingProfile.ROUND_ROBIN).model_copy(update={"kube_context": None})
    fake = FakeCluster([])
    args: tuple[object, ...] = (outputs, ClusterOptions(run_id="r1"), 1.0)
    if run is run_cluster_perf:
        args = (outputs, RECIPE_WORKLOAD, tmp_path / "perf", ClusterOptions(run_id="r1"), 1.0)

    with pytest.raises(UsageError, match="no kubeContext"):
        run(*args, api=fake)

    record("rest: context")
    assert fake.calls == [] and fake.selectors == []
    assert not (tmp_path / "perf").exists()


@dataclass
class FakeStacks:
    """The A/B's stacks, as far as the GPU count asks them: the layer stack's kubeContext."""

    context: str | None
    asked: list[tuple[str, str]] = field(default_factory=list)

    def config_value(self, stack: str, key: str) -> str | None:
        self.asked.append((stack, key))
        if self.context == "unreadable":
            raise DeployError(f"`pulumi config get {key}` of stack {stack} failed")
        return self.context


@pytest.mark.parametrize(
    ("option", "layer_context"),
    [(None, None), (None, ""), (None, "unreadable"), (None, "named"), ("named", None)],
)
def test_the_ab_counts_gpus_only_on_a_named_cluster(
    clusters: Clusters, option: str | None, layer_context: str | None
) -> None:
    stacks = FakeStacks(layer_context)
    options = ClusterOptions(kubeconfig=clusters.kubeconfig, context=option)
    target = ClusterAbTarget(stacks=stacks, cluster=options)  # type: ignore[arg-type]

    named = bool(option) or layer_context == "named"
    expected = ClusterUnreachable if named else UsageError
    with pytest.raises(expected) as raised:
        target.available_gpus(lambda line: None)

    record("rest: context")
    assert clusters.canary.connections == 0
    assert (clusters.named.connections > 0) == named
    if not named:
        assert "--context" in str(raised.value) and "--gpus" in str(raised.value)
    assert stacks.asked == ([] if option else [("shared", "cosmos3-nano-reasoner:kubeContext")])


def test_the_lab_reads_a_frontend_service_only_on_a_named_cluster(clusters: Clusters) -> None:
    outputs = cluster_outputs(RoutingProfile.ROUND_ROBIN).model_copy(update={"kube_context": None})

    with pytest.raises(LabGraphError, match="no kubeContext"):
        published_frontend_url(outputs, clusters.kubeconfig)

    record("rest: context")
    assert clusters.canary.connections == 0 and clusters.named.connections == 0


# --- a malformed kubeconfig ----------------------------------------------------------------------

SERVER = "clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:9'}\n"
CONTEXT = "contexts:\n- name: named\n  context: {cluster: c, user: u}\ncurrent-context: named\n"
MALFORMED_KUBECONFIGS: dict[str, str | bytes | None] = {
    "missing": None,
    "directory": "dir",
    "fifo": "fifo",
    "empty": "",
    "not yaml": "a: [",
    "a list": "- 1\n- 2\n",
    "a scalar": "hello",
    "binary": bytes(range(256)),
    "utf-16": "apiVersion: v1".encode("utf-16"),
    "deep nesting": "[" * 3000 + "]" * 3000,
    "contexts a string": "contexts: abc\ncurrent-context: named\n",
    "context without its cluster": CONTEXT,
    "server a number": "clusters:\n- name: c\n  cluster: {server: 5}\n"
    + CONTEXT
    + "users:\n- name: u\n  user: {}\n",
    "certificate data not base64": SERVER
    + CONTEXT
    + "users:\n- name: u\n  user: {client-certificate-data: zz, client-key-data: zz}\n",
    "token file missing": SERVER
    + CONTEXT
    + "users:\n- name: u\n  user: {tokenFile: /nonexistent}\n",
    "a key set twice": "current-context: a\ncurrent-context: b\n",
    "too big": " " * (17 * 2**20),
}


def malformed_kubeconfig(folder: Path, shape: str) -> Path:
    import os

    spec = MALFORMED_KUBECONFIGS[shape]
    path = folder / "kubeconfig"
    if spec == "dir":
        path.mkdir()
    elif spec == "fifo":
        os.mkfifo(path)  # the client would wait forever for a writer
    elif isinstance(spec, bytes):
        path.write_bytes(spec)
    elif spec is not None:
        path.write_text(spec)
    return path


@pytest.mark.parametrize("shape", sorted(MALFORMED_KUBECONFIGS))
@pytest.mark.parametrize("stage", ["smoke", "perf"])
def test_a_malformed_kubeconfig_is_named_never_a_traceback(
    tmp_path: Path, shape: str, stage: str
) -> None:
    kubeconfig = malformed_kubeconfig(tmp_path, shape)
    argv = [stage, "--outputs", str(outputs_file(tmp_path)), f"--kubeconfig={kubeconfig}"]
    argv += ["--context=named", "--start-timeout=1", "--timeout=1"]
    argv += (
        ["--out", str(tmp_path / "perf"), "--videos=1", "--questions=1"] if stage == "perf" else []
    )

    status, _out, err = run_command("rest: kubeconfig", stages_main, argv)

    assert status in STATUSES and status != 0, err
    assert "Traceback" not in err
    assert str(kubeconfig) in err and "not-a-real-token" not in err, err


@pytest.mark.parametrize("shape", sorted(MALFORMED_KUBECONFIGS))
def test_the_ab_gpu_count_names_a_malformed_kubeconfig(tmp_path: Path, shape: str) -> None:
    kubeconfig = malformed_kubeconfig(tmp_path, shape)
    target = ClusterAbTarget(
        stacks=FakeStacks("named"),  # type: ignore[arg-type]
        cluster=ClusterOptions(kubeconfig=kubeconfig),
    )

    with pytest.raises(ClusterUnreachable, match="cannot use context 'named'") as raised:
        target.available_gpus(lambda line: None)

    record("rest: kubeconfig")
    assert str(kubeconfig) in str(raised.value)


# --- what a dry run refuses ----------------------------------------------------------------------

REFUSED_OUTPUTS: dict[str, tuple[str, Any]] = {
    "namespace of 64": ("namespace", "n" * 64),
    "namespace uppercase": ("namespace", "Cosmos3"),
    "namespace underscore": ("namespace", "cosmos3_nano"),
    "namespace dotted": ("namespace", "cosmos3.nano"),
    "namespace empty": ("namespace", ""),
    "frontend file://": ("frontendUrl", "file:///etc/passwd"),
    "frontend ftp://": ("frontendUrl", "ftp://frontend.ns.svc:8000"),
    "frontend gopher://": ("frontendUrl", "gopher://frontend:70"),
    "frontend no scheme": ("frontendUrl", "frontend.ns.svc:8000"),
    "frontend no host": ("frontendUrl", "http://:8000"),
    "frontend port 0": ("frontendUrl", "http://frontend.ns.svc:0"),
    "frontend port 65536": ("frontendUrl", "http://frontend.ns.svc:65536"),
    "frontend port 99999": ("frontendUrl", "http://frontend.ns.svc:99999"),
    "frontend port not a number": ("frontendUrl", "http://frontend.ns.svc:80a"),
    "models file://": ("modelsUrl", "file:///v1/models"),
    "frontendPort 0": ("frontendPort", 0),
    "frontendPort 65536": ("frontendPort", 65536),
    "frontendPort -1": ("frontendPort", -1),
}
ACCEPTED_OUTPUTS: dict[str, dict[str, Any]] = {
    "namespace of 63": {"namespace": "n" * 63},
    "namespace of 1": {"namespace": "n"},
    "port 1": {"frontendPort": 1, "frontendUrl": "http://frontend.ns.svc:1"},
    "port 65535": {"frontendPort": 65535, "frontendUrl": "https://frontend.ns.svc:65535"},
    "no port in the URL": {"frontendUrl": "http://frontend.ns.svc"},
}


@pytest.mark.parametrize("stage", ["smoke", "perf"])
@pytest.mark.parametrize("case", sorted(REFUSED_OUTPUTS))
def test_a_dry_run_refuses_what_the_api_server_or_the_pod_would(
    tmp_path: Path, stage: str, case: str
) -> None:
    key, value = REFUSED_OUTPUTS[case]
    argv = [stage, "--dry-run", "--outputs", str(outputs_file(tmp_path, **{key: value}))]

    status, out, err = run_command("rest: dry runs", stages_main, argv)

    assert status == EXIT_USAGE and f"  {key}: " in err, err
    assert out == ""


@pytest.mark.parametrize("stage", ["smoke", "perf"])
@pytest.mark.parametrize("case", sorted(ACCEPTED_OUTPUTS))
def test_a_dry_run_accepts_the_edges(tmp_path: Path, stage: str, case: str) -> None:
    argv = [stage, "--dry-run", "--outputs", str(outputs_file(tmp_path, **ACCEPTED_OUTPUTS[case]))]
    argv += ["--videos=1", "--questions=1"] if stage == "perf" else []

    status, out, err = run_command("rest: dry runs", stages_main, argv)

    assert status == 0, err
    assert "kind: Job" in out


# --- bucket names --------------------------------------------------------------------------------

LABEL = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?\Z")
DOTTED = st.lists(LABEL, min_size=1, max_size=4).map(".".join)
NEAR_MISSES = [
    "ab",
    "a" * 64,
    "My-Bucket",
    "my_bucket",
    "-bucket",
    "bucket-",
    ".bucket",
    "bucket.",
    "my..bucket",
    "192.168.5.4",
    "0.0.0.0000",  # IP-formatted with a leading zero: hypothesis found it accepted (2026-12-05)
    "xn--bucket",
    "sthree-bucket",
    "amzn-s3-demo-bucket",
    "bucket-s3alias",
    "bucket--ol-s3",
    "bucket.mrap",
    "bucket--x-s3",
    "bucket--table-s3",
    "bücket",
    "bucket\x1b[2J",
    "s3://bucket",
    "bucket/key",
]
BUCKETS = st.one_of(
    DOTTED,
    st.sampled_from(NEAR_MISSES),
    DOTTED.map(str.upper),
    DOTTED.map(lambda name: f"{name}_x"),
    st.text(max_size=70),
)


def s3_accepts(name: str) -> bool:
    """The test's own reading of S3's rules for general purpose buckets."""
    parts = name.split(".")
    return (
        3 <= len(name) <= 63
        and all(part and part[0].isalnum() and part[-1].isalnum() for part in parts)
        and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for part in parts for c in part)
        and not (len(parts) == 4 and all(part.isdigit() for part in parts))
        and not name.startswith(("xn--", "sthree-", "amzn-s3-demo-"))
        and not name.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"))
    )


@SLOW
@PROPERTIES
@given(bucket=BUCKETS)
def test_a_bucket_name_is_checked_against_s3s_rules_before_any_request(
    tmp_path_factory: pytest.TempPathFactory, bucket: str
) -> None:
    folder = tmp_path_factory.mktemp("bucket")
    push = ["archive", "push", "--dry-run", f"--bucket={bucket}", "--stack=rr", "--stage=perf"]
    push += [f"--outputs={outputs_file(folder)}", f"--dir={FIXTURES}"]

    status, out, err = run_command("rest: buckets", stages_main, push)

    if s3_accepts(bucket):
        assert status == 0 and f"s3://{bucket}/" in out, err
        return
    assert status == EXIT_USAGE and "--bucket must be a bucket name" in err, err
    assert printable(err), repr(err)
    with serving() as store:  # and no request reaches a store
        endpoint = f"--endpoint-url=http://127.0.0.1:{store.server_address[1]}"
        listing = ["archive", "list", f"--bucket={bucket}", endpoint]
        status, _out, err = run_command("rest: buckets", stages_main, listing)
    assert status == EXIT_USAGE and store.connections == 0, err


@pytest.mark.parametrize("bucket", ["abc", "a" * 63, "a.b", "1-2", "my-ab-results", "10.0.0.1a"])
@pytest.mark.parametrize("option", ["--archive-bucket", "--bucket"])
def test_legal_bucket_names_of_3_to_63_characters_are_accepted(
    tmp_path: Path, bucket: str, option: str
) -> None:
    if option == "--bucket":
        argv = ["archive", "push", "--dry-run", f"--bucket={bucket}", "--stack=rr"]
        argv += [f"--outputs={outputs_file(tmp_path)}", "--stage=perf", f"--dir={FIXTURES}"]
    else:  # an empty directory store: the report finds no run, after the name was taken
        argv = ["report", f"--archive-bucket={bucket}", "--stacks", "rr", "sa"]
        argv += [f"--archive-endpoint=file://{tmp_path / 'store'}", f"--out={tmp_path / 'r'}"]

    status, _out, err = run_command("rest: buckets", stages_main, argv)

    assert "must be a bucket name" not in err, err
    assert status == (0 if option == "--bucket" else 1), err


# --- control characters --------------------------------------------------------------------------

CONTROL = st.sampled_from(
    ["\x1b[2J", "\x1b]0;owned\x07", "\x1b[31m", "\r", "\b", "\x00", "\x7f", "\x9b31m", "\x85"]
    + ["\u200b", "\u202e", "\u2028", "\ufeff", "\n"]
)
WITH_CONTROL = st.tuples(st.text("abc0123456789", max_size=6), CONTROL, st.text("def", max_size=4))


@SLOW
@PROPERTIES
@given(parts=WITH_CONTROL)
def test_a_commit_with_control_characters_is_refused_shown_escaped(
    tmp_path_factory: pytest.TempPathFactory, parts: tuple[str, str, str]
) -> None:
    folder = tmp_path_factory.mktemp("commit")
    commit = "".join(parts)
    argv = ["archive", "push", "--dry-run", "--bucket=b-1", "--stack=rr", f"--commit={commit}"]
    argv += [f"--outputs={outputs_file(folder)}", "--stage=perf", f"--dir={FIXTURES}"]

    status, out, err = run_command("rest: control characters", stages_main, argv)

    assert status == EXIT_USAGE and "--commit" in err, err
    assert printable(out + err), repr(err)


@SLOW
@PROPERTIES
@given(parts=WITH_CONTROL)
def test_an_ab_run_id_with_control_characters_is_refused_shown_escaped(
    parts: tuple[str, str, str],
) -> None:
    argv = ["ab", "--rehearse", "--gpus=8", f"--run-id={''.join(parts)}"]

    status, out, err = run_command("rest: control characters", stages_main, argv)

    assert status == EXIT_USAGE and "--run-id" in err, err
    assert printable(out + err), repr(err)


def write_run(store: Path, commit: str, stack: str = "rr", run_id: str = "run-1") -> None:
    """A complete perf run in a directory store, its record's commit as someone else wrote it."""
    outputs = cluster_outputs(RoutingProfile.ROUND_ROBIN)
    record_ = RunRecord.create(
        stack=stack,
        stage=Stage.PERF,
        outputs=outputs,
        run_id=run_id,
        commit="0" * 40,
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    results = (FIXTURES / "results-round-robin.json").read_bytes()
    from stages.archive.records import describe

    stored = record_.model_copy(
        update={"commit": commit, "files": (describe("results.json", results),)}
    )
    run = store / "b-1" / "cosmos3-nano-reasoner" / stack / "round-robin" / run_id / "perf"
    (run / "files").mkdir(parents=True)
    (run / "files" / "results.json").write_bytes(results)
    (run / "manifest.json").write_text(stored.model_dump_json())


@SLOW
@PROPERTIES
@given(parts=WITH_CONTROL)
def test_an_archived_commit_is_listed_escaped(
    tmp_path_factory: pytest.TempPathFactory, parts: tuple[str, str, str]
) -> None:
    store = tmp_path_factory.mktemp("store")
    write_run(store, "".join(parts))
    argv = ["archive", "list", "--bucket=b-1", f"--endpoint-url=file://{store}"]

    status, out, err = run_command("rest: control characters", stages_main, argv)

    assert status == 0 and "run-1" in out, err
    assert printable(out + err), repr(out)


# --- ab --stacks ---------------------------------------------------------------------------------

STACK_NAMES = st.from_regex(r"\A[A-Za-z0-9_.-]{1,20}\Z").filter(lambda n: n not in (".", ".."))
HOSTILE_STACKS = st.one_of(
    st.sampled_from(
        [
            "./round-robin",
            "/tmp/rr",
            "../rr",
            "a/b",
            "a/b/c/d",
            "org//rr",
            "rr ",
            "r r",
            "",
            ".",
            "..",
            "rr\x1b[2J",
            "x" * 101,
            "org/proj/",
            "~/rr",
            "rr:1",
            "rr@2",
        ]
    ),
    st.text(max_size=12),
)


@pytest.fixture
def deployments(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """The A/B runs that would have deployed (none is: the run is recorded instead)."""
    started: list[argparse.Namespace] = []

    def record_run(args: argparse.Namespace) -> int:
        started.append(args)
        return 0

    monkeypatch.setattr(cli, "run_ab", record_run)
    return started


def stack_name_legal(name: str) -> bool:
    parts = name.split("/")
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
    return len(parts) in (1, 3) and all(
        0 < len(p) <= 100 and set(p) <= allowed and p not in (".", "..") for p in parts
    )


def argparse_hands_over(first: str, second: str) -> bool:
    """Whether argparse itself gives `--stacks FIRST SECOND` both tokens. It reads a token that
    starts with `-` as an option (`-A`), but not a lone `-` or a negative number (`-1`), and drops
    a `--`; then `--stacks` is a value short, exit 2. Asked of argparse rather than restated, so
    the oracle cannot miss one of its rules."""
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    parser.add_argument("--stacks", nargs=2)
    try:
        parsed, _rest = parser.parse_known_args(["--stacks", first, second])
    except argparse.ArgumentError:
        return False
    return bool(parsed.stacks == [first, second])


@SLOW
@PROPERTIES
@given(
    first=st.one_of(STACK_NAMES, HOSTILE_STACKS),
    second=st.one_of(STACK_NAMES, HOSTILE_STACKS, st.just("same")),
)
@example(first="0", second="-A")  # found by CI: a legal stack name argparse reads as an option
@example(first="-1", second="b")
@example(first="0", second="-")  # found by CI: a lone `-` is a value to argparse
@example(first="0", second="--")
def test_the_ab_stacks_are_checked_before_anything_is_deployed(
    tmp_path_factory: pytest.TempPathFactory,
    deployments: list[argparse.Namespace],
    first: str,
    second: str,
) -> None:
    second = first if second == "same" else second
    out_dir = tmp_path_factory.mktemp("ab")
    argv = ["ab", "--rehearse", "--gpus=8", f"--out={out_dir}", "--stacks", first, second]
    deployments.clear()

    status, _out, err = run_command("rest: ab stacks", stages_main, argv)

    legal = all(stack_name_legal(name) for name in (first, second))
    legal = legal and argparse_hands_over(first, second)
    if legal and first != second and "shared" not in (first, second):
        assert status == 0 and len(deployments) == 1, err
    else:
        assert status == EXIT_USAGE and "--stacks" in err, err
        assert deployments == []
        assert printable(err), repr(err)


@pytest.mark.parametrize(
    "stacks",
    [["round-robin", "session-affinity"], ["acme/cosmos3/rr", "acme/cosmos3/sa"], ["a", "b"]],
)
def test_legal_ab_stacks_are_accepted(
    tmp_path: Path, deployments: list[argparse.Namespace], stacks: list[str]
) -> None:
    argv = ["ab", "--rehearse", "--gpus=8", f"--out={tmp_path}", "--stacks", *stacks]

    status, _out, err = run_command("rest: ab stacks", stages_main, argv)

    assert status == 0 and deployments[0].stacks == stacks, err
