"""`python -m stages` against hostile input, family by family (issue 20): file arguments of every
shape, absurd numbers, credentials planted in every option and outputs field, folders holding a
user's files, a full disk and no permission. Every case ends with a documented exit status and
a message naming the argument: no traceback, no hang, no file of the user's changed, no canary
in anything printed or written.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import REPO_ROOT
from components.contract import StackOutputs
from components.routing import RoutingProfile
from stages import cli, targets
from stages.errors import EXIT_STATUSES
from tests.stages.cluster.fakes import cluster_outputs
from tests.stages.support import FIXTURES
from tests.support import LOCAL_TOOLS as LOCAL
from tests.tally import flag, run_command, texts_below

# Hundreds of generated hostile cases (issue 20), each a whole command: seconds in all.
pytestmark = pytest.mark.slow

STATUSES = {code for code, _ in EXIT_STATUSES}
PROPERTIES = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def report_argv(out: Path) -> list[str]:
    """`report` of the two fixture results into `out`."""
    results = [str(FIXTURES / f"results-{p.value}.json") for p in RoutingProfile]
    return ["report", "--results", *results, "--out", str(out)]


def stages_main(argv: list[str]) -> int:
    return cli.main(argv, local=LOCAL)


def outputs_json(**changes: Any) -> str:
    data = cluster_outputs(RoutingProfile.ROUND_ROBIN).to_json_dict() | changes
    return json.dumps(data)


# --- file arguments --------------------------------------------------------------------------------

FILE_SHAPES = {
    "missing": None,
    "directory": "dir",
    "fifo": "fifo",
    "device /dev/zero": "/dev/zero",
    "device /dev/null": "/dev/null",
    "link to a directory": "link-dir",
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "utf-16": "{}".encode("utf-16"),
    "NUL inside": b'{"a": "\x00"}',
    "json array": b"[1, 2, 3]",
    "json string": b'"outputs"',
    "json number": b"1e308",
    "json null": b"null",
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "huge integer": b'{"frontendPort": ' + b"9" * 5000 + b"}",
    "wrong object": b'{"namespace": 1}',
    "too big": b" " * (5 * 2**20) + b"{}",
    "truncated": outputs_json().encode()[:40],
}


def make_file(tmp_path: Path, shape: str) -> Path:
    spec = FILE_SHAPES[shape]
    path = tmp_path / f"input-{abs(hash(shape))}"
    if spec is None:
        return path
    if spec == "dir":
        path.mkdir()
    elif spec == "fifo":
        os.mkfifo(path)  # reading it would wait forever for a writer
    elif spec == "link-dir":
        (tmp_path / "a-dir").mkdir(exist_ok=True)
        path.symlink_to(tmp_path / "a-dir")
    elif isinstance(spec, str):
        return Path(spec)
    else:
        path.write_bytes(spec)
    return path


FILE_ARGUMENTS = [
    ("smoke --outputs", lambda f, tmp: ["smoke", "--outputs", str(f), "--dry-run"]),
    ("perf --outputs", lambda f, tmp: ["perf", "--outputs", str(f), "--dry-run"]),
    (
        "report --results",
        lambda f, tmp: [
            "report",
            "--results",
            str(f),
            str(FIXTURES / "results-session-affinity.json"),
            "--out",
            str(tmp / "report"),
        ],
    ),
    (
        "archive push --outputs",
        lambda f, tmp: [
            "archive",
            "push",
            "--stack",
            "s",
            "--outputs",
            str(f),
            "--stage",
            "perf",
            "--dir",
            str(FIXTURES),
            "--bucket",
            "b-1",
            "--dry-run",
        ],
    ),
]


@pytest.mark.parametrize("shape", sorted(FILE_SHAPES))
@pytest.mark.parametrize(("argument", "argv"), FILE_ARGUMENTS, ids=[a for a, _ in FILE_ARGUMENTS])
def test_every_file_argument_is_checked_before_use(
    tmp_path: Path, shape: str, argument: str, argv: Any
) -> None:
    path = make_file(tmp_path, shape)

    status, _out, err = run_command("file arguments", stages_main, argv(path, tmp_path), seconds=30)

    assert status == 2, (shape, err)
    assert str(path) in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "report").exists()


# --- numbers ---------------------------------------------------------------------------------------

ABSURD = [
    "1e308",
    "-1e308",
    "inf",
    "nan",
    "1e3",
    "100000",
    "99999999999999999999",
    "-0",
    "0x10",
    str(2**63),
    str(2**31),
    "4294967296",
    "1_000",
    "\u0663",
    "9" * 5000,
    "",
]
NUMERIC = {
    "--videos": 10_000,
    "--questions": 1_000,
    "--output-tokens": 32_768,
    "--prefix-tokens": 32_768,
    "--turn-jitter-ms": 60_000,
    "--seed": 2**32 - 1,
    "--concurrency": 1_000,
    "--wait-seconds": 30 * 86400,
    "--timeout": 30 * 86400,
    "--start-timeout": 30 * 86400,
}
"""Each numeric option of `perf`, and the largest value it takes."""


@PROPERTIES
@given(
    option=st.sampled_from(sorted(NUMERIC)),
    value=st.sampled_from(ABSURD) | st.integers(-(10**40), 10**40).map(str),
)
def test_an_absurd_number_is_refused_naming_the_option(
    tmp_path_factory: pytest.TempPathFactory, option: str, value: str
) -> None:
    outputs = tmp_path_factory.getbasetemp() / "numbers.json"
    outputs.write_text(outputs_json())
    argv = ["perf", "--outputs", str(outputs), "--dry-run", "--videos=2", "--questions=2"]

    status, _out, err = run_command("numbers", stages_main, [*argv, f"{option}={value}"])

    assert status in STATUSES and "Traceback" not in err
    try:
        number = float(value)
    except ValueError:
        number = None
    in_range = number is not None and value.isascii() and 0 <= number <= NUMERIC[option]
    if status != 0:
        assert option in err or "--videos" in err, err
    else:
        assert in_range, (option, value)


@pytest.mark.parametrize("gpus", ["0", "-3", "100001", str(10**30)])
def test_the_ab_refuses_an_absurd_gpu_count(gpus: str) -> None:
    status, _out, err = run_command("numbers", stages_main, ["ab", "--rehearse", "--gpus", gpus])
    assert status == 2 and "--gpus must be 1 to 100000" in err


# --- credentials -----------------------------------------------------------------------------------

CANARY = "Cn7f3a9d2e41b8c6Zq"
PLANTED = {
    "userinfo": f"https://ci:{CANARY}@pypi.example.com/simple",
    "token user": f"https://{CANARY}0123@git.example.com/r.git",
    "query token": f"https://pypi.example.com/simple?token={CANARY}",
    "presigned": f"https://b.s3.amazonaws.com/k?X-Amz-Credential=AK%2F{CANARY}&X-Amz-Signature={CANARY}",
    "ngc key": f"nvapi-{CANARY}{CANARY}",
    "bearer": f"Bearer {CANARY}.{CANARY}",
}
OPTIONS = ["--pip-index-url", "--image", "--context", "--tokenizer", "--run-id", "--kubeconfig"]
OUTPUT_FIELDS = [
    "frontendUrl",
    "modelsUrl",
    "kubeContext",
    "namespace",
    "portForwardCommand",
    "servedModel",
    "graphName",
]


@pytest.mark.parametrize("planted", sorted(PLANTED))
@pytest.mark.parametrize("where", OPTIONS + [f"outputs.{field}" for field in OUTPUT_FIELDS])
@pytest.mark.parametrize("stage", ["smoke", "perf"])
def test_a_planted_credential_is_never_printed_or_written(
    tmp_path: Path, planted: str, where: str, stage: str
) -> None:
    secret = PLANTED[planted]
    field = where.removeprefix("outputs.")
    outputs = tmp_path / "outputs.json"
    outputs.write_text(outputs_json(**({field: secret} if where.startswith("outputs.") else {})))
    option = [f"{where}={secret}"] if where.startswith("--") else []
    argv = [stage, "--outputs", str(outputs), "--dry-run", "--videos=2", "--questions=2"][
        : 4 + 2 * (stage == "perf")
    ]

    status, out, err = run_command("secrets (stages)", stages_main, [*argv, *option])

    written = texts_below(tmp_path).replace(outputs.read_text(), "")
    hits = sum(CANARY in text for text in (out, err, written))
    flag("secrets (stages)", "secret", hits)
    assert status in STATUSES and "Traceback" not in err
    assert hits == 0, (status, out[-2000:], err[-2000:])


def test_an_archived_run_never_holds_a_credential_of_its_outputs(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text(
        outputs_json(frontendUrl=PLANTED["userinfo"], modelsUrl=PLANTED["query token"])
    )
    results = tmp_path / "results"
    results.mkdir()
    (results / "results.json").write_text((FIXTURES / "results-round-robin.json").read_text())
    archive = tmp_path / "archive"
    argv = [
        "archive",
        "push",
        "--stack",
        "rr",
        "--outputs",
        str(outputs),
        "--stage",
        "perf",
        "--dir",
        str(results),
        "--bucket",
        "lab",
        "--endpoint-url",
        f"file://{archive}",
    ]

    status, out, err = run_command("secrets (stages)", stages_main, argv)

    hits = sum(CANARY in text for text in (out, err, texts_below(archive)))
    flag("secrets (stages)", "secret", hits)
    assert status == 0, err
    assert hits == 0
    assert "<secret>@pypi.example.com" in texts_below(archive)


# --- output folders --------------------------------------------------------------------------------

USER_FILES = {
    "Pulumi.yaml": "name: mine\n",
    "Pulumi.prod.yaml": "config: {}\n",
    "report.md": "my own notes\n",
    "ab-chart.png": "\x89PNG mine",
}


def digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()
    }


@pytest.mark.parametrize(
    "names",
    [["Pulumi.yaml"], ["report.md"], ["ab-chart.png", "Pulumi.prod.yaml"], sorted(USER_FILES)],
)
def test_report_never_replaces_a_users_file(tmp_path: Path, names: list[str]) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    for name in names:
        (out / name).write_text(USER_FILES[name])
    before = digest(out)
    argv = report_argv(out)

    status, _, err = run_command("user files (stages)", stages_main, argv)

    changed = [name for name in before if digest(out).get(name) != before[name]]
    flag("user files (stages)", "deleted", len(changed))
    assert status == 2 and f"report: --out {out} holds files" in err
    assert changed == []


def test_report_refuses_the_project_folder(tmp_path: Path) -> None:
    argv = report_argv(Path.cwd())
    if Path.cwd().resolve() != REPO_ROOT:
        pytest.skip("run from the project root")
    status, _, err = run_command("user files (stages)", stages_main, argv)
    assert status == 2 and "is the project's own folder" in err


def test_report_writes_its_own_folder_again(tmp_path: Path) -> None:
    argv = report_argv(tmp_path / "r")
    assert run_command("user files (stages)", stages_main, argv)[0] == 0
    assert run_command("user files (stages)", stages_main, argv)[0] == 0


def test_a_second_perf_run_on_one_folder_is_refused_naming_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from common.output_folders import claimed_folder

    outputs = tmp_path / "outputs.json"
    outputs.write_text(outputs_json())
    monkeypatch.setattr(
        targets.ClusterTarget, "run_perf", lambda *a, **k: pytest.fail("a second run started")
    )
    argv = ["perf", "--outputs", str(outputs), "--out", str(tmp_path / "perf")]

    with claimed_folder(tmp_path / "perf", "python -m stages perf"):
        status, _, err = run_command("one run per folder", stages_main, argv)

    assert status == 2 and f"is in use by PID {os.getpid()} (python -m stages perf" in err


# --- a full disk, no permission ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EACCES, "permission denied"),
        (errno.EROFS, "the file system is read-only"),
        (errno.EDQUOT, "the disk quota is exceeded"),
    ],
)
def test_a_failed_write_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str
) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text(outputs_json())

    def refuse(*args: object, **kw: object) -> StackOutputs:
        raise OSError(code, os.strerror(code), str(tmp_path / "perf" / "results.json"))

    monkeypatch.setattr(targets.ClusterTarget, "run_perf", refuse)
    argv = ["perf", "--outputs", str(outputs), "--out", str(tmp_path / "perf")]

    status, _, err = run_command("causes (stages)", stages_main, argv)

    assert status == 1
    assert f"cannot write {tmp_path / 'perf' / 'results.json'}: {words}" in err


def test_a_report_on_a_full_disk_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: object) -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli, "write_report", full)
    argv = report_argv(tmp_path / "r")

    status, _, err = run_command("causes (stages)", stages_main, argv)

    assert status == 2 and "cannot write the report (the disk is full" in err
