"""`python -m stages smoke|perf` with cluster outputs: dispatch, dry runs and exit codes.

The Kubernetes API is the fake of fakes.py, put in place of `stages.cluster.run.connect`;
each scenario finishes without waiting (the Job's end is visible at the first poll).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import REPO_ROOT
from components.routing import RoutingProfile
from stages.archive import checked_files
from stages.cli import main
from stages.cluster import run as cluster
from stages.core.results import ProfileResults
from stages.errors import EXIT_STATUSES
from stages.incluster.log_exports import Export, export_lines
from tests.stages.cluster.fakes import (
    FakeCluster,
    Frame,
    cluster_outputs,
    failed,
    pending,
    pod_files,
    running,
    succeeded,
)
from tests.stages.support import FIXTURES


def outputs_file(tmp_path: Path, profile: RoutingProfile = RoutingProfile.SESSION_AFFINITY) -> str:
    path = tmp_path / f"outputs-{profile.value}.json"
    path.write_text(json.dumps(cluster_outputs(profile).to_json_dict()))
    return str(path)


@pytest.fixture
def use_fake(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[Frame]], FakeCluster]:
    def install(frames: list[Frame]) -> FakeCluster:
        fake = FakeCluster(frames)
        monkeypatch.setattr(cluster, "connect", lambda outputs, options: fake)
        return fake

    return install


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["smoke", "perf", "report"])
def test_help_documents_the_exit_codes(stage: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stages", stage, "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0
    assert "exit status:" in result.stdout
    for code, meaning in EXIT_STATUSES:
        assert f"  {code:<3} {meaning[:40]}" in " ".join(result.stdout.split("\n"))


def test_smoke_dry_run_prints_valid_manifests_without_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "smoke",
            "--outputs",
            outputs_file(tmp_path),
            "--dry-run",
            "--kubeconfig",
            str(tmp_path / "none"),
        ]
    )

    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert status == 0
    assert [d["kind"] for d in documents] == ["ConfigMap", "Service", "Job"]


def test_perf_dry_run_for_a_cluster_is_the_recipes_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["perf", "--outputs", outputs_file(tmp_path), "--dry-run", "--run-id", "r1"])

    config_map, service, job = yaml.safe_load_all(capsys.readouterr().out)
    plan = json.loads(gzip.decompress(pod_files(config_map)["perf-plan.json.gz"]))
    assert status == 0
    assert [(lvl["concurrency"], lvl["requests"]) for lvl in plan["levels"]] == [
        (c, 4000) for c in (1, 2, 4, 8, 16)
    ]
    assert all("min_tokens:128" in lvl["argv"] for lvl in plan["levels"])
    assert service["spec"]["selector"]["cosmos3-nano-reasoner/run-id"] == "r1"
    assert job["metadata"]["name"] == "cosmos3-nano-reasoner-perf"


def test_cluster_perf_options_reach_the_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "perf",
        "--outputs",
        outputs_file(tmp_path),
        "--dry-run",
        "--concurrency",
        "4",
        "--connection-reuse",
        "pooled",
        "--tokenizer",
        "nvidia/cosmos3-nano-reasoner",
        "--image",
        "python:3.11.7-slim-bookworm@sha256:" + "b" * 64,
        "--pip-index-url",
        "https://pypi.mirror.example/simple",
        "--timeout",
        "600",
    ]

    assert main(argv) == 0
    config_map, _, job = yaml.safe_load_all(capsys.readouterr().out)
    (level,) = json.loads(gzip.decompress(pod_files(config_map)["perf-plan.json.gz"]))["levels"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert level["argv"][level["argv"].index("--connection-reuse-strategy") + 1] == "pooled"
    assert level["argv"][level["argv"].index("--tokenizer") + 1] == "nvidia/cosmos3-nano-reasoner"
    assert container["image"].endswith("@sha256:" + "b" * 64)
    assert env["PIP_INDEX_URL"] == "https://pypi.mirror.example/simple"
    assert job["spec"]["activeDeadlineSeconds"] == 900


NOT_READY = "Frontend not ready: nothing listed\n"
SCENARIOS: list[tuple[str, list[Frame], int, str]] = [
    ("passed", [succeeded("Smoke test passed: a box\n")], 0, ""),
    ("failed", [failed("Smoke test FAILED: HTTP 500\n")], 1, "smoke test FAILED: Job"),
    ("frontend not ready", [failed(NOT_READY, exit_code=3)], 3, "Frontend not ready"),
    ("pod never starts", [pending("InvalidImageName")], 5, "did not start"),
]


@pytest.mark.parametrize(
    ("name", "frames", "code", "message"), SCENARIOS, ids=[s[0] for s in SCENARIOS]
)
def test_smoke_exit_codes(
    name: str,
    frames: list[Frame],
    code: int,
    message: str,
    tmp_path: Path,
    use_fake: Callable[[list[Frame]], FakeCluster],
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_fake(frames)

    status = main(["smoke", "--outputs", outputs_file(tmp_path)])

    captured = capsys.readouterr()
    assert status == code, captured.err
    assert message in captured.err
    assert (captured.out.strip().splitlines() or [""])[-1].startswith("Smoke test passed") is (
        code == 0
    )


def test_smoke_timeout_exits_4(
    tmp_path: Path,
    use_fake: Callable[[list[Frame]], FakeCluster],
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = use_fake([running("frontend lists the model\n")])

    status = main(["smoke", "--outputs", outputs_file(tmp_path), "--timeout", "0"])

    assert status == 4
    assert "did not finish within 0 s" in capsys.readouterr().err
    assert fake.calls[-1] == ("delete", "Job", "cosmos3-nano-reasoner-smoke")


def test_cluster_perf_writes_the_results_report_and_archive_read(
    tmp_path: Path,
    use_fake: Callable[[list[Frame]], FakeCluster],
    capsys: pytest.CaptureFixture[str],
) -> None:
    export = Export(
        2, "profile_export_aiperf.json", (FIXTURES / "aiperf-session-affinity-c2.json").read_bytes()
    )
    use_fake(
        [succeeded("\n".join([*export_lines(export), "Perf sweep finished: 1 levels"]) + "\n")]
    )
    out = tmp_path / "perf"
    workload = ["--videos", "3", "--questions", "3", "--output-tokens", "8", "--concurrency", "2"]

    status = main(["perf", "--outputs", outputs_file(tmp_path), "--out", str(out), *workload])

    assert status == 0, capsys.readouterr().err
    results = ProfileResults.load(out / "results.json")
    assert results.target == "cluster" and [lvl.concurrency for lvl in results.levels] == [2]
    report = main(
        [
            "report",
            "--results",
            str(out / "results.json"),
            str(FIXTURES / "results-round-robin.json"),
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert report == 0


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST.", "api.localhost", "127.0.0.2", "[::1]", "0.0.0.0", "[::]"]
)
@pytest.mark.parametrize("key", ["frontendUrl", "modelsUrl"])
def test_frontends_that_are_the_pod_itself_are_refused_for_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str, key: str
) -> None:
    outputs: dict[str, Any] = cluster_outputs(RoutingProfile.ROUND_ROBIN).to_json_dict()
    url = f"http://{host}:8000" + ("/v1/models" if key == "modelsUrl" else "")
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs | {key: url}))

    assert main(["perf", "--outputs", str(path)]) == 2  # bad input: nothing is submitted
    assert f"cannot reach the {key} {url} " in capsys.readouterr().err


PIP_URL = "https://ci:" + "pw-0123456789@pypi.example.com/simple"  # assembled: not a real one


def test_a_dry_run_masks_the_pip_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        ["smoke", "--outputs", outputs_file(tmp_path), "--dry-run", "--pip-index-url", PIP_URL]
    )

    captured = capsys.readouterr()
    secret, *_, job = yaml.safe_load_all(captured.out)
    assert status == 0
    assert secret["kind"] == "Secret" and secret["stringData"] == {"PIP_INDEX_URL": "<secret>"}
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "PIP_INDEX_URL",
        "valueFrom": {
            "secretKeyRef": {"name": "cosmos3-nano-reasoner-smoke-pip", "key": "PIP_INDEX_URL"}
        },
    } in env
    assert "pw-0123456789" not in captured.out + captured.err


def test_a_perf_run_keeps_masked_manifests_that_the_archive_accepts(
    tmp_path: Path,
    use_fake: Callable[[list[Frame]], FakeCluster],
    capsys: pytest.CaptureFixture[str],
) -> None:
    export = Export(
        2, "profile_export_aiperf.json", (FIXTURES / "aiperf-session-affinity-c2.json").read_bytes()
    )
    fake = use_fake(
        [succeeded("\n".join([*export_lines(export), "Perf sweep finished: 1 levels"]) + "\n")]
    )
    out = tmp_path / "perf"
    workload = ["--videos", "3", "--questions", "3", "--output-tokens", "8", "--concurrency", "2"]

    status = main(
        [
            "perf",
            "--outputs",
            outputs_file(tmp_path),
            "--out",
            str(out),
            *workload,
            "--pip-index-url",
            PIP_URL,
        ]
    )

    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert fake.created("Secret")["stringData"] == {"PIP_INDEX_URL": PIP_URL}
    kept = (out / "manifests.yaml").read_text()
    assert "PIP_INDEX_URL: <secret>" in kept and "pw-0123456789" not in kept
    assert "pw-0123456789" not in captured.out + captured.err
    assert len(checked_files(out)) > 3  # the archive's secret scan finds nothing to refuse


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--videos", "555"], "needs 2775 distinct videos (--videos 555 x 5 --concurrency levels"),
        (["--videos", "2774", "--concurrency", "1,2"], "reduce --videos or the levels"),
        (["--questions", "1000", "--videos", "100"], "cannot fit the perf ConfigMap"),
    ],
)
def test_a_sweep_too_large_for_a_cluster_exits_2_before_anything_is_submitted(
    tmp_path: Path,
    use_fake: Callable[[list[Frame]], FakeCluster],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    fake = use_fake([])

    for dry_run in ([], ["--dry-run"]):
        status = main(
            [
                "perf",
                "--outputs",
                outputs_file(tmp_path),
                "--out",
                str(tmp_path / "p"),
                *argv,
                *dry_run,
            ]
        )

        assert status == 2
        assert message in capsys.readouterr().err
    assert fake.calls == [] and not (tmp_path / "p").exists()


def test_an_out_directory_that_cannot_be_written_exits_2(
    tmp_path: Path,
    use_fake: Callable[[list[Frame]], FakeCluster],
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = use_fake([])
    blocker = tmp_path / "a-file"
    blocker.write_text("")

    status = main(["perf", "--outputs", outputs_file(tmp_path), "--out", str(blocker / "perf")])

    assert status == 2
    assert f"--out {blocker / 'perf'}: cannot write there" in capsys.readouterr().err
    assert fake.calls == []
