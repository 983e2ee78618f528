"""Properties of `python -m stages`: whatever the command line or the outputs file, the command
ends with a documented exit status and a message, never a traceback.

Generated command lines take hostile option values (zero, negative, huge, non-numeric, empty,
unicode, separators, URLs with credentials) and generated outputs files are random JSON, the
contract with keys missing or of the wrong type, binary garbage, or a directory. Everything runs
with `--dry-run` (or against a local directory store): no cluster, no lab, no network.
"""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from components.contract import StackOutputs
from components.routing import RoutingProfile
from stages.cli import main
from stages.cluster import run as cluster_run
from stages.errors import EXIT_STATUSES
from tests.stages.cluster.fakes import FakeCluster, cluster_outputs, succeeded
from tests.stages.support import lab_outputs_for
from tests.support import LOCAL_TOOLS as LOCAL

pytestmark = pytest.mark.slow  # every test here runs hundreds of command lines (hypothesis)
STATUSES = {code for code, _ in EXIT_STATUSES}
SECRET = "hunter2-" + "0123456789"  # a password in generated URLs: it must never be shown
PROPERTIES = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory with one cluster and one lab outputs file, and room for generated ones."""
    directory = tmp_path_factory.mktemp("properties")
    for name, outputs in [
        ("cluster.json", cluster_outputs(RoutingProfile.SESSION_AFFINITY)),
        ("lab.json", lab_outputs_for(RoutingProfile.ROUND_ROBIN)),
    ]:
        (directory / name).write_text(json.dumps(outputs.to_json_dict()))
    (directory / "results").mkdir()
    (directory / "results" / "results.json").write_text("{}")
    yield directory


def run(argv: list[str]) -> tuple[int, str]:
    """The exit status (argparse's own exits included) and stderr of one command; anything
    raised other than SystemExit fails the property."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv, local=LOCAL)
        except SystemExit as exited:
            status = exited.code if isinstance(exited.code, int) else 2
    event(f"exit status {status}")
    return status, err.getvalue()


# --- hostile values ------------------------------------------------------------------------------

NASTY = [
    "0",
    "-1",
    "-0",
    "",
    " ",
    ",",
    ",,",
    "1,1",
    "1,,2",
    "1;2",
    "1 2",
    "1e3",
    "0x10",
    "1_000",
    "nan",
    "inf",
    "-inf",
    "1.5",
    "9" * 5000,
    "\u0663",
    "\uff11",
    "\x00",
    "\n",
    "' OR 1=1",
    "${HOME}",
    "../..",
    "/",
    "a/b",
    "-",
    "--videos",
    "\u202e",
    "\U0001f4a5",
    "999999999999999999999",
    "http://[::1",
    "http://[::1]:8000",
    "http://localhost:8000",
    "http://:0",
    "http://h:99999",
]
numbers = st.integers(min_value=-(10**20), max_value=10**20).map(str)
small_numbers = st.integers(min_value=-3, max_value=40).map(str)
separated = st.lists(st.integers(min_value=-2, max_value=20), max_size=6).flatmap(
    lambda levels: st.sampled_from([",", ";", " ", ", ", ",,"]).map(
        lambda sep: sep.join(str(level) for level in levels)
    )
)
urls = st.builds(
    "{}://{}{}/{}".format,
    st.sampled_from(["https", "http", "ftp", "", "HTTPS"]),
    st.sampled_from(["", f"user:{SECRET}@", f"{SECRET}@", ":@", "u:p@"]),
    st.sampled_from(["mirror.example", "", "[::1", "10.0.0.1:3141", "a b", "m\u00fcller.example"]),
    st.text(max_size=8),
)
values = st.one_of(
    st.sampled_from(NASTY), numbers, small_numbers, separated, urls, st.text(max_size=20)
)

WORKLOAD = [
    "--videos",
    "--questions",
    "--output-tokens",
    "--concurrency",
    "--prefix-tokens",
    "--turn-jitter-ms",
    "--seed",
]
CLUSTER = [
    "--wait-seconds",
    "--timeout",
    "--start-timeout",
    "--run-id",
    "--pip-index-url",
    "--image",
    "--context",
]
PERF_CLUSTER = ["--tokenizer", "--connection-reuse"]


@st.composite
def command_lines(draw: st.DrawFn, least: int = 1) -> tuple[list[str], list[str]]:
    """A smoke or perf dry run with at least `least` options, each with a hostile value."""
    stage = draw(st.sampled_from(["smoke", "perf"]))
    options = CLUSTER + (WORKLOAD + PERF_CLUSTER if stage == "perf" else [])
    chosen = draw(st.lists(st.sampled_from(options), min_size=least, max_size=4))
    # Small sizes first, so that a value the drawn options leave valid keeps the dry run quick.
    small = ["--videos=2", "--questions=2"] if stage == "perf" else []
    argv = [stage, "--dry-run", *small, *(f"{option}={draw(values)}" for option in chosen)]
    return argv, chosen


@PROPERTIES
@given(line=command_lines(), target=st.sampled_from(["cluster.json", "lab.json"]))
def test_any_command_line_ends_with_a_documented_status_naming_the_option(
    files: Path, line: tuple[list[str], list[str]], target: str
) -> None:
    argv, chosen = line
    outputs = files / target

    status, err = run([*argv[:2], "--outputs", str(outputs), *argv[2:]])

    assert status in STATUSES, err
    if status != 0:
        assert any(option in err for option in [*chosen, "--videos", "--questions"]), err
    assert "Traceback" not in err
    shown_elsewhere = any(SECRET in a for a in argv if not a.startswith("--pip-index-url="))
    assert shown_elsewhere or SECRET not in err  # a --pip-index-url password is never shown


# --- hostile outputs files -----------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
CONTRACT = cluster_outputs(RoutingProfile.SESSION_AFFINITY).to_json_dict()


@st.composite
def broken_contracts(draw: st.DrawFn) -> dict[str, Any]:
    """The contract with keys dropped or given values of any type (or hostile strings)."""
    outputs = dict(CONTRACT)
    for key in draw(st.lists(st.sampled_from(StackOutputs.keys()), max_size=3)):
        outputs.pop(key, None)
    for key in draw(st.lists(st.sampled_from(StackOutputs.keys()), max_size=3)):
        outputs[key] = draw(json_values | st.sampled_from(NASTY) | urls)
    if draw(st.booleans()):
        outputs["target"] = draw(st.sampled_from(["cluster", "lab", "Lab", ""]))
    return outputs


URL_KEYS = ["frontendUrl", "modelsUrl"]
TEXT_KEYS = [
    "namespace",
    "graphName",
    "frontendService",
    "servedModel",
    "modelCacheClaim",
    "portForwardCommand",
    "kubeContext",
]
NUMBER_KEYS = ["frontendPort", "workerReplicas", "workerGpus"]
hostile_urls = (
    st.sampled_from(
        [
            "http://[::1",
            "http://[",
            "http://h:99999",
            "http://:0",
            "http://localhost:8000",
            "",
            "not a url",
            "http://[::1]:8000/v1",
            "http://u:p@h",
            "http://h/\n",
            "//h",
            "http:///x",
        ]
    )
    | urls
)
hostile_text = st.sampled_from(NASTY) | urls | st.text(max_size=30)


@st.composite
def typed_contracts(draw: st.DrawFn) -> dict[str, Any]:
    """The contract with hostile values of the right types (each key kept or replaced): what
    passes the contract reaches the stage's builders."""
    outputs = dict(CONTRACT)
    for keys, hostile in [
        (URL_KEYS, hostile_urls),
        (TEXT_KEYS, hostile_text),
        (NUMBER_KEYS, st.integers(min_value=-(2**70), max_value=2**70)),
    ]:
        for key in keys:
            outputs[key] = draw(st.just(outputs[key]) | hostile)
    if draw(st.booleans()):
        outputs["target"] = "lab"
    return outputs


outputs_contents = st.one_of(
    json_values.map(lambda value: json.dumps(value).encode()),
    broken_contracts().map(lambda value: json.dumps(value).encode()),
    typed_contracts().map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=64),
    st.text(max_size=64).map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.just(b"[" * 50_000),
    st.just(b'{"frontendPort": ' + b"7" * 5000 + b"}"),
    st.none(),  # a directory
)


@PROPERTIES
@given(content=outputs_contents, stage=st.sampled_from(["smoke", "perf"]))
def test_any_outputs_file_ends_with_a_documented_status_naming_the_file(
    files: Path, content: bytes | None, stage: str
) -> None:
    path = files / f"outputs-{uuid.uuid4().hex}.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    small = ["--videos=2", "--questions=2"] if stage == "perf" else []

    status, err = run([stage, "--outputs", str(path), "--dry-run", *small])

    assert status in STATUSES, err
    if status != 0:
        assert str(path) in err or "outputs" in err, err
    assert "Traceback" not in err


PASSED = "frontend lists the model\nSmoke test passed: a box moves\n"


@PROPERTIES
@given(content=typed_contracts(), line=command_lines(least=0))
def test_a_cluster_run_of_any_usable_outputs_ends_with_a_documented_status(
    files: Path, content: dict[str, Any], line: tuple[list[str], list[str]]
) -> None:
    """Past the dry run: the same outputs and options through a whole (fake) cluster run."""
    path = files / f"outputs-{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(content | {"target": "cluster"}))
    stage, _, *options = line[0]
    frames = [succeeded(PASSED if stage == "smoke" else "Perf sweep finished: 0 levels\n")]
    out = files / f"out-{uuid.uuid4().hex}"

    with mock.patch.object(cluster_run, "connect", lambda outputs, opts: FakeCluster(frames)):
        status, err = run(
            [stage, "--outputs", str(path), *options, "--start-timeout=0"]
            + ([f"--out={out}"] if stage == "perf" else [])
        )

    assert status in STATUSES, err
    assert "Traceback" not in err


# --- hostile archive names -----------------------------------------------------------------------

names = st.one_of(st.sampled_from(NASTY), st.text(max_size=70), st.from_regex(r"[a-z0-9.-]{1,70}"))


@PROPERTIES
@given(
    bucket=names,
    prefix=st.one_of(st.just("cosmos3-nano-reasoner"), names),
    stack=st.one_of(st.just("round-robin"), names),
    run_id=st.one_of(st.just("r1"), names),
)
def test_any_archive_name_ends_with_a_documented_status_naming_the_option(
    files: Path, bucket: str, prefix: str, stack: str, run_id: str
) -> None:
    store = f"file://{files / 'store'}"  # a directory store: nothing leaves this machine
    push = [
        "archive",
        "push",
        "--dry-run",
        f"--bucket={bucket}",
        f"--prefix={prefix}",
        f"--endpoint-url={store}",
        f"--stack={stack}",
        f"--run-id={run_id}",
        "--stage=perf",
        f"--outputs={files / 'cluster.json'}",
        f"--dir={files / 'results'}",
    ]
    report = [
        "report",
        f"--archive-bucket={bucket}",
        f"--archive-prefix={prefix}",
        f"--archive-endpoint={store}",
        "--stacks",
        stack,
        "session-affinity",
        "--run-ids",
        run_id,
        "r2",
        f"--out={files / 'report'}",
    ]

    for argv in (push, report):
        status, err = run(argv)

        assert status in STATUSES, err
        assert "Traceback" not in err
        if status == 2:
            assert any(o in err for o in ("bucket", "prefix", "--stack", "--run-id", "run-ids")), (
                err
            )
