"""Issue 30, secrets: a canary secret of every shape, planted through every option, outputs field,
environment variable and file the stages and the archive accept; every byte they print and every
file they write is searched for the canary's secret part.

The oracle is the planted strings themselves, never the masker's patterns: each case makes its
own canary (unique to the case) and looks for it, as it was planted, in stdout, stderr and every
file below the case's output folders. The inputs the test writes (the outputs file, a result
folder to push) live apart and are not searched. The cluster runs use the fake cluster of
`tests/stages/cluster/fakes.py`; the archive is the `file://` store.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from components.routing import RoutingProfile
from stages import cli
from stages.cluster import run as cluster
from stages.errors import EXIT_STATUSES
from stages.incluster.log_exports import Export, export_lines
from tests.stages.cluster.fakes import FakeCluster, cluster_outputs, failed, succeeded
from tests.stages.support import FIXTURES
from tests.support import LOCAL_TOOLS as LOCAL
from tests.tally import flag, run_command

# Hundreds of whole commands, a chart rendered in some: a minute or two in all.
pytestmark = pytest.mark.slow

FAMILY = "secrets"
STATUSES = {code for code, _ in EXIT_STATUSES}
WORKLOAD = ["--videos", "3", "--questions", "3", "--output-tokens", "8", "--concurrency", "2"]
"""The captured AIPerf export's sizes, so that a fake cluster's perf run succeeds."""


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _legacy_ngc_key(canary: str) -> str:
    return _b64(f"{canary[:26].ljust(26, 'q')}:{hashlib.md5(canary.encode()).hexdigest()}")


Shape = Callable[[str], tuple[str, tuple[str, ...]]]
SHAPES: dict[str, Shape] = {
    "url password holding /": lambda c: (f"https://ci:pa/{c}@mirror.example.com/simple", (c,)),
    "url password holding #?@": lambda c: (f"https://ci:{c}#?@x@mirror:3141/simple", (c,)),
    "url token holding /": lambda c: (f"https://{c}/ab@registry.example.com/r.git", (c,)),
    "url query token": lambda c: (f"https://mirror.example.com/simple?token={c}", (c,)),
    "PGPASSWORD": lambda c: (f"PGPASSWORD={c}", (c,)),
    "MYSQL_PWD": lambda c: (f"export MYSQL_PWD='{c}'", (c,)),
    "DB_PASS": lambda c: (f"DB_PASS: {c}", (c,)),
    "NGC_KEY env entry": lambda c: (json.dumps({"name": "NGC_KEY", "value": c}), (c,)),
    "HFTOKEN": lambda c: (f"--env HFTOKEN={c}", (c,)),
    "image login": lambda c: (f"ci:{c}@registry.example.com/team/python:3.12", (c,)),
    "registry server": lambda c: (f"ci:{c}@nvcr.io", (c,)),
    "basic header": lambda c: (f"Authorization: Basic {_b64('ci:' + c)}", (_b64("ci:" + c),)),
    "bearer token": lambda c: (f"Authorization: Bearer {c}", (c,)),
    "docker config": lambda c: (
        json.dumps({"auths": {"nvcr.io": {"auth": _b64("ci:" + c), "identitytoken": c}}}),
        (c, _b64("ci:" + c)),
    ),
    "curl -u": lambda c: (f"curl -u ci:{c} https://mirror.example.com/x", (c,)),
    "gitlab token": lambda c: (f"glpat-{c}", (c,)),
    "legacy NGC key after --apikey": lambda c: (
        f"--apikey {_legacy_ngc_key(c)}",
        (_legacy_ngc_key(c),),
    ),
    "NGC key": lambda c: (f"nvapi-{c}", (c,)),
}
"""Each shape of issue 30: (the text to plant, its secret parts) for a canary."""


def canary_for(*case: str) -> str:
    """A token no other case and no ordinary text holds: letters and digits, unique per case."""
    return "Cn" + hashlib.sha256("/".join(case).encode()).hexdigest()[:24] + "Zq"


@dataclass
class Case:
    """One planted canary: where the inputs go (never searched) and where the outputs go."""

    root: Path
    text: str
    secrets: tuple[str, ...]

    @property
    def inputs(self) -> Path:
        path = self.root / "in"
        path.mkdir(exist_ok=True)
        return path

    @property
    def outputs(self) -> Path:
        return self.root / "out"

    def outputs_file(self, **changes: Any) -> str:
        data = cluster_outputs(RoutingProfile.ROUND_ROBIN).to_json_dict() | changes
        path = self.inputs / f"outputs-{len(list(self.inputs.iterdir()))}.json"
        path.write_text(json.dumps(data))
        return str(path)

    def results_dir(self, extra: dict[str, str] | None = None) -> Path:
        """A perf result folder to push: the fixture's results, and `extra` files."""
        folder = self.inputs / "results"
        folder.mkdir(exist_ok=True)
        (folder / "results.json").write_text((FIXTURES / "results-round-robin.json").read_text())
        for name, text in (extra or {}).items():
            (folder / name).write_text(text)
        return folder

    def archive(self) -> str:
        return f"file://{self.outputs / 'archive'}"


def files_below(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def run_case(case: Case, argv: list[str]) -> tuple[int, int]:
    """Run the command; (exit status, canary hits in what it printed and in every file it
    wrote: new or changed below the output folder; what the case planted there is input)."""
    before, paths_before = files_below(case.outputs), set(case.outputs.rglob("*"))
    status, out, err = run_command(FAMILY, lambda a: cli.main(a, local=LOCAL), argv)
    after = files_below(case.outputs)
    written = [data.decode("latin-1") for path, data in after.items() if before.get(path) != data]
    names = [str(path) for path in set(case.outputs.rglob("*")) - paths_before]  # keys, folders
    texts = [out, err, *written, *names]
    hits = sum(text.count(secret) for text in texts for secret in case.secrets)
    flag(FAMILY, "secret", hits)
    assert status in STATUSES and "Traceback" not in err, (status, err[-2000:])
    return status, hits


# --- the channels: every option, outputs field, environment variable and file ------------------


def _smoke_dry_run_option(case: Case, option: str) -> list[str]:
    return ["smoke", "--outputs", case.outputs_file(), "--dry-run", f"{option}={case.text}"]


def _perf_dry_run_option(case: Case, option: str) -> list[str]:
    out = case.outputs / "perf"
    argv = ["perf", "--outputs", case.outputs_file(), "--dry-run", "--out", str(out)]
    return [*argv, *WORKLOAD, f"{option}={case.text}"]


def _dry_run_field(case: Case, field: str) -> list[str]:
    return ["perf", "--outputs", case.outputs_file(**{field: case.text}), "--dry-run", *WORKLOAD]


CLUSTER_OPTIONS = [
    "--pip-index-url",
    "--image",
    "--context",
    "--tokenizer",
    "--run-id",
    "--kubeconfig",
    "--connection-reuse",
]
OUTPUT_FIELDS = [
    "frontendUrl",
    "modelsUrl",
    "kubeContext",
    "namespace",
    "portForwardCommand",
    "servedModel",
    "graphName",
    "sessionHeader",
    "modelCacheClaim",
]
Channel = Callable[[Case, pytest.MonkeyPatch], list[str]]
CHANNELS: dict[str, Channel] = {}
for _option in CLUSTER_OPTIONS:
    CHANNELS[f"smoke --dry-run {_option}"] = partial(
        lambda c, m, option: _smoke_dry_run_option(c, option), option=_option
    )
    CHANNELS[f"perf --dry-run {_option}"] = partial(
        lambda c, m, option: _perf_dry_run_option(c, option), option=_option
    )
for _field in OUTPUT_FIELDS:
    CHANNELS[f"perf --dry-run outputs.{_field}"] = partial(
        lambda c, m, field: _dry_run_field(c, field), field=_field
    )


def _export(case: Case) -> Export:
    """The captured AIPerf export, carrying the canary where AIPerf echoes its input (the
    endpoint, its headers) and where a failed request's message lands."""
    data = json.loads((FIXTURES / "aiperf-session-affinity-c2.json").read_text())
    endpoint = data["input_config"]["endpoint"]
    endpoint["urls"] = [*endpoint["urls"], case.text]
    endpoint["headers"] = [case.text]
    return Export(2, "profile_export_aiperf.json", json.dumps(data).encode())


def _pod_log(case: Case, export: Export | None = None) -> str:
    lines = [
        "installing AIPerf",
        f"pip: Looking in indexes: {case.text}",
        f"env: {case.text}",
        *(export_lines(export) if export else []),
        "Perf sweep finished: 1 levels",
    ]
    return "\n".join(lines) + "\n"


def _use_fake_cluster(monkeypatch: pytest.MonkeyPatch, log: str, passed: bool = True) -> None:
    frame = succeeded(log) if passed else failed(log)
    fake = FakeCluster([frame], namespace="cosmos3-nano-reasoner")
    monkeypatch.setattr(cluster, "connect", lambda outputs, options: fake)


def _cluster_perf(case: Case, monkeypatch: pytest.MonkeyPatch, passed: bool = True) -> list[str]:
    _use_fake_cluster(monkeypatch, _pod_log(case, _export(case)), passed)
    out = ["--out", str(case.outputs / "perf"), *WORKLOAD, f"--pip-index-url={case.text}"]
    return ["perf", "--outputs", case.outputs_file(servedModel=case.text), *out]


def _cluster_smoke(case: Case, monkeypatch: pytest.MonkeyPatch, passed: bool) -> list[str]:
    log = _pod_log(case) + (f"Smoke test passed: {case.text}\n" if passed else "")
    _use_fake_cluster(monkeypatch, log, passed)
    return ["smoke", "--outputs", case.outputs_file(), f"--pip-index-url={case.text}"]


CHANNELS |= {
    "perf on a cluster: pod log, export, option, outputs": _cluster_perf,
    "perf on a cluster that fails": lambda c, m: _cluster_perf(c, m, passed=False),
    "smoke on a cluster: the answer": lambda c, m: _cluster_smoke(c, m, passed=True),
    "smoke on a cluster that fails": lambda c, m: _cluster_smoke(c, m, passed=False),
}


def _results_file(case: Case, **changes: Any) -> str:
    data = json.loads((FIXTURES / "results-round-robin.json").read_text()) | changes
    path = case.inputs / "results-round-robin.json"
    path.write_text(json.dumps(data))
    return str(path)


def _report(case: Case, **changes: Any) -> list[str]:
    first = _results_file(case, **changes)
    second = str(FIXTURES / "results-session-affinity.json")
    return ["report", "--results", first, second, "--out", str(case.outputs / "report")]


def _level_error(case: Case) -> dict[str, Any]:
    data = json.loads((FIXTURES / "results-round-robin.json").read_text())
    levels = [
        level | {"error_kinds": [f"1 x 401 Unauthorized: {case.text}"]} for level in data["levels"]
    ]
    return {"levels": levels}


CHANNELS |= {
    "report --results: failure": lambda c, m: _report(c, complete=False, failure=c.text),
    "report --results: graph name": lambda c, m: _report(c, graph_name=c.text),
    "report --results: error kinds": lambda c, m: _report(c, **_level_error(c)),
}


def _push(
    case: Case,
    *extra: str,
    stack: str = "rr",
    outputs: str | None = None,
    folder: Path | None = None,
) -> list[str]:
    argv = ["archive", "push", "--stack", stack, "--stage", "perf", "--bucket", "lab"]
    argv += ["--outputs", outputs or case.outputs_file()]
    argv += ["--dir", str(folder or case.results_dir())]
    return [*argv, "--endpoint-url", case.archive(), *extra]


def _push_then_report(case: Case) -> list[str]:
    """A run archived by an older version, its manifest holding the canary (`commit`, the
    outputs), then `report` from the archive: what it prints and writes (sources.json)."""
    for stack in ("rr", "aff"):
        profile = "round-robin" if stack == "rr" else "session-affinity"
        folder = case.inputs / stack
        folder.mkdir()
        (folder / "results.json").write_text((FIXTURES / f"results-{profile}.json").read_text())
        outputs = cluster_outputs(RoutingProfile(profile)).to_json_dict()
        record = {
            "stack": stack,
            "profile": profile,
            "run_id": "run-1",
            "stage": "perf",
            "created_at": "2026-11-30T18:42:00Z",
            "commit": case.text,
            "outputs": outputs | {"servedModel": case.text},
            "files": [_described(folder / "results.json")],
        }
        place = case.outputs / "archive" / "lab" / "cosmos3-nano-reasoner" / stack / profile
        files = place / "run-1" / "perf" / "files"
        files.mkdir(parents=True)
        (files / "results.json").write_bytes((folder / "results.json").read_bytes())
        (files.parent / "manifest.json").write_text(json.dumps(record))
    return _report_from_the_archive(case, "--stacks", "rr", "aff")


def _described(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {"name": path.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _file_endpoint_with_a_login(case: Case) -> str:
    """`file://ci:<password>@<dir>` whose password holds a `/`, as the tester's did: read as a
    path, it would name a folder by the password. The `..` keeps that folder inside the case's
    own (`/..<outputs>/<secret>@<outputs>/a`), never at the file system's root."""
    return f"file://ci:x/..{case.outputs}/{case.secrets[0]}@{case.outputs}/a"


def _archive_list(case: Case, *options: str) -> list[str]:
    return ["archive", "list", "--bucket", "lab", *options]


def _endpoint_from_the_environment(case: Case, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://ci:{case.text}@127.0.0.1:9/")
    return _archive_list(case)


def _push_with_a_secret_variable(
    case: Case, monkeypatch: pytest.MonkeyPatch, name: str
) -> list[str]:
    """A result file holding the value of a secret-named variable, whatever its shape: refused."""
    monkeypatch.setenv(name, case.secrets[0])
    notes = {"notes.txt": f"the password is {case.secrets[0]}"}
    return _push(case, folder=case.results_dir(notes))


def _report_from_the_archive(case: Case, *options: str) -> list[str]:
    argv = ["report", "--archive-bucket", "lab", "--archive-endpoint", case.archive()]
    return [*argv, *options, "--out", str(case.outputs / "report")]


CHANNELS |= {
    "archive push --commit": lambda c, m: _push(c, "--commit", c.text),
    "archive push --dry-run --commit": lambda c, m: _push(c, "--dry-run", "--commit", c.text),
    "archive push --region": lambda c, m: _push(c, "--region", c.text),
    "archive push --run-id": lambda c, m: _push(c, "--run-id", c.text),
    "archive push --stack": lambda c, m: _push(c, stack=c.text),
    "archive push outputs.frontendUrl": lambda c, m: _push(
        c, outputs=c.outputs_file(frontendUrl=c.text)
    ),
    "archive push outputs.servedModel": lambda c, m: _push(
        c, outputs=c.outputs_file(servedModel=c.text)
    ),
    "archive push --dir holding it": lambda c, m: _push(
        c, folder=c.results_dir({"pod.log": c.text})
    ),
    "archive list --aws-profile": lambda c, m: _archive_list(c, "--aws-profile", c.text),
    "archive list --endpoint-url": lambda c, m: _archive_list(c, "--endpoint-url", c.text),
    "archive list --endpoint-url file:// with it": lambda c, m: _archive_list(
        c, "--endpoint-url", _file_endpoint_with_a_login(c)
    ),
    "archive list $AWS_ENDPOINT_URL_S3": _endpoint_from_the_environment,
    "report --archive-endpoint": lambda c, m: [
        *["report", "--archive-bucket", "lab", "--archive-endpoint", c.text],
        *["--stacks", "a", "b", "--out", str(c.outputs / "report")],
    ],
    "report --stacks --run-ids": lambda c, m: _report_from_the_archive(
        c, "--stacks", c.text, "b", "--run-ids", "r", c.text
    ),
    "report from an archive whose manifest holds it": lambda c, m: _push_then_report(c),
}


for _name in ("PGPASSWORD", "MYSQL_PWD", "DB_PASS", "NGC_KEY", "HFTOKEN"):
    CHANNELS[f"archive push, ${_name}'s value in a file"] = partial(
        _push_with_a_secret_variable, name=_name
    )


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_a_planted_canary_is_never_printed_or_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, channel: str, shape: str
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-access-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret-access-key")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    text, secrets = SHAPES[shape](canary_for(channel, shape))
    case = Case(tmp_path, text, secrets)

    _status, hits = run_case(case, CHANNELS[channel](case, monkeypatch))

    assert hits == 0, (channel, shape)
