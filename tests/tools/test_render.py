"""The offline render writes the program's objects, masked, and the outputs; refuses bad config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from common.credentials import MASK
from tools import config_reference, render
from tools.stack_files import SECRET_PLACEHOLDER


def test_render_writes_each_object_in_apply_order_and_the_outputs(tmp_path: Path) -> None:
    assert render.main(["--stack", "dev", "--example-site", "--out", str(tmp_path)]) == 0
    files = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert files == [
        "01-namespace-cosmos3-dev.yaml",
        "02-secret-ngc-api-secret.yaml",
        "03-persistentvolumeclaim-shared-model-cache.yaml",
        "04-job-cosmos3-nano-reasoner-model-download.yaml",
        "05-configmap-cosmos3-nano-reasoner-layer-guard.yaml",
        "06-dynamographdeployment-cosmos3-nano-reasoner-agg-h200-round-robin.yaml",
        "07-poddisruptionbudget-cosmos3-nano-reasoner-agg-h200-round-robin-worker.yaml",
    ]
    job = yaml.safe_load((tmp_path / files[3]).read_text())
    assert job["spec"]["backoffLimit"] == 3 and isinstance(job["spec"]["backoffLimit"], int)
    assert list(job)[:3] == ["apiVersion", "kind", "metadata"]
    outputs = json.loads((tmp_path / "outputs.json").read_text())
    assert outputs["graphName"] == "cosmos3-nano-reasoner-agg-h200-round-robin"


def test_render_masks_secrets_and_never_writes_the_placeholder(tmp_path: Path) -> None:
    render.main(["--stack", "dev", "--example-site", "--out", str(tmp_path)])
    secret = yaml.safe_load((tmp_path / "02-secret-ngc-api-secret.yaml").read_text())
    assert secret["stringData"] == {"NGC_API_KEY": MASK}
    for path in tmp_path.iterdir():
        assert SECRET_PLACEHOLDER not in path.read_text()


def test_set_overrides_config_like_pulumi_config_set(tmp_path: Path) -> None:
    render.main(
        [
            "--stack",
            "round-robin",
            "--example-site",
            "--set",
            "workerReplicas=4",
            "--out",
            str(tmp_path),
        ]
    )
    (graph,) = tmp_path.glob("*dynamographdeployment*")
    assert yaml.safe_load(graph.read_text())["spec"]["components"][1]["replicas"] == 4


def test_missing_site_config_is_reported_with_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert render.main(["--stack", "dev", "--out", str(tmp_path)]) == 2
    assert "cosmos3-nano-reasoner:kubeContext is required" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.yaml"))


def test_the_configuration_reference_page_matches_pulumi_yaml() -> None:
    assert config_reference.TARGET.parts[-2:] == ("docs", "configuration.md")
    text = config_reference.TARGET.read_text()
    assert config_reference.synced(text) == text, (
        "run: .venv-dev/bin/python -m tools.config_reference"
    )


def test_the_configuration_reference_prints_or_refuses_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "configuration.md"
    page.write_text(f"{config_reference.START}\nold\n{config_reference.END}\n")
    monkeypatch.setattr(config_reference, "TARGET", page)
    monkeypatch.setattr(config_reference, "REPO_ROOT", tmp_path)

    assert config_reference.sync(["--print"]) == 0
    assert capsys.readouterr().out.startswith("| key | type | default | meaning |")
    for typo in (["--chek"], ["--check", "--print"], ["extra"]):
        with pytest.raises(SystemExit) as usage:
            config_reference.sync(typo)
        assert usage.value.code == 2
    assert config_reference.sync(["--check"]) == 1
    assert "old" in page.read_text()
    capsys.readouterr()

    for kept in (config_reference.START, config_reference.END):  # the other marker deleted
        page.write_text(f"{kept}\nold\n")
        for argv in ([], ["--check"]):
            assert config_reference.sync(argv) == 2
            assert "lacks the marker <!-- CONFIG-REFERENCE:" in capsys.readouterr().err
        assert page.read_text() == f"{kept}\nold\n"


@pytest.mark.parametrize(
    ("shared_stack", "qualified"),
    [
        ("shared", "organization/cosmos3-nano-reasoner/shared"),
        ("layer-eu", "organization/cosmos3-nano-reasoner/layer-eu"),
        ("acme/cosmos3-nano-reasoner/shared", "acme/cosmos3-nano-reasoner/shared"),
    ],
)
def test_render_serves_the_layer_under_the_configured_shared_stack(
    tmp_path: Path, shared_stack: str, qualified: str
) -> None:
    from tools.offline import shared_stack_name

    overrides = {"sharedStack": shared_stack}
    assert shared_stack_name("round-robin", overrides) == qualified

    argv = ["--stack", "round-robin", "--example-site", "--set", f"sharedStack={shared_stack}"]
    assert render.main([*argv, "--out", str(tmp_path / "render")]) == 0
    (graph,) = (tmp_path / "render").glob("*dynamographdeployment*")
    assert yaml.safe_load(graph.read_text())["metadata"]["namespace"] == "cosmos3-nano-reasoner"


def test_a_stack_without_a_shared_stack_gets_the_shipped_name() -> None:
    from tools.offline import shared_stack_name
    from tools.stack_files import SHARED_STACK

    assert shared_stack_name("dev") == shared_stack_name("shared") == SHARED_STACK
