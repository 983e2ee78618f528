"""The engine's build (testenv/engine/) without building anything: pins, cache keys, progress and
the one-line failures. The build itself runs in `make engine` and is used by the real tier."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from common import REPO_ROOT
from testenv.engine import build, go, pins


def go_mod(wrapper: str) -> str:
    return (pins.WRAPPERS / wrapper / "go.mod").read_text()


def test_the_wrapper_modules_require_the_pinned_versions() -> None:
    assert f"github.com/pulumi/pulumi/pkg/v3 v{pins.PULUMI_VERSION}" in go_mod("pulumi")
    assert f"github.com/pulumi/pulumi/sdk/v3 v{pins.LANGUAGE_HOST_VERSION}" in go_mod(
        "language-python"
    )
    assert f"k8s.io/kubernetes v{pins.KUBERNETES_VERSION}" in go_mod("kubernetes")
    assert f"go.etcd.io/etcd/server/v3 v{pins.ETCD_VERSION}" in go_mod("etcd")
    assert f"sigs.k8s.io/kwok v{pins.KWOK_VERSION}" in go_mod("kwok")
    seaweedfs = f"\tgithub.com/seaweedfs/seaweedfs {pins.SEAWEEDFS_MODULE_VERSION}"
    assert seaweedfs in go_mod("seaweedfs")
    for wrapper in ("pulumi", "language-python", "kubernetes", "etcd", "kwok", "seaweedfs"):
        assert (pins.WRAPPERS / wrapper / "go.sum").stat().st_size > 0, wrapper


def test_seaweedfs_is_built_from_its_wrappers_tool_at_the_pinned_commit() -> None:
    weed = pins.S3_SERVER
    commit = pins.SEAWEEDFS_MODULE_VERSION.rsplit("-", 1)[1]
    assert f"\ntool {weed.package}\n" in go_mod("seaweedfs")
    assert weed.version_vars == (
        f"github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT={commit}",
    )


def test_every_kubernetes_staging_module_is_pinned_to_the_same_release() -> None:
    replaces = re.findall(r"^\t(k8s\.io/\S+) => (\S+) (\S+)$", go_mod("kubernetes"), re.MULTILINE)
    assert len(replaces) == 33
    minor = ".".join(pins.KUBERNETES_VERSION.split(".")[1:])
    assert {version for _, _, version in replaces} == {f"v0.{minor}"}
    assert all(module == target for module, target, _ in replaces)


def test_the_program_asks_for_the_provider_the_engine_builds() -> None:
    for lock in ("requirements.txt", "requirements-stages.lock", "requirements-dev.lock"):
        locked = (REPO_ROOT / lock).read_text()
        assert f"\npulumi-kubernetes=={pins.PROVIDER_VERSION}\n" in locked, lock


def test_a_changed_wrapper_changes_only_its_tools_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "engine"
    shutil.copytree(pins.WRAPPERS, copy)
    monkeypatch.setattr(pins, "WRAPPERS", copy)
    before = {tool.name: tool.key("go1.26.8") for tool in pins.TOOLS}
    whole = pins.engine_key("go1.26.8")
    (copy / "kwok" / "go.mod").write_text(go_mod("kwok") + "\n// changed\n")

    after = {tool.name: tool.key("go1.26.8") for tool in pins.TOOLS}

    assert {name for name in before if before[name] != after[name]} == {"kwok"}
    assert pins.engine_key("go1.26.8") != whole
    assert pins.engine_key("go1.27.0") != pins.engine_key("go1.26.8")


def test_without_go_the_build_says_so_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(go.EngineError) as refused:
        build.build(tmp_path, out=lambda _: None, environ={"PATH": str(tmp_path)})
    assert str(refused.value).count("\n") == 0
    assert "`go`" in str(refused.value) and "not on PATH" in str(refused.value)


def test_a_too_old_go_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\necho go1.22.5\n")
    fake.chmod(0o755)
    with pytest.raises(go.EngineError, match=r"go1\.22\.5 is too old"):
        go.go_version({"PATH": str(tmp_path)})


def test_building_one_tool_fills_only_its_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "go_version", lambda environ: "go1.26.8")
    built: list[str] = []

    def fake_build(builder: go.Builder, tool: pins.GoTool, dest: Path) -> None:
        built.append(tool.name)
        dest.write_text("binary")

    monkeypatch.setattr(build, "build_tool", fake_build)
    weed = pins.S3_SERVER

    paths = build.build_tools(tmp_path, ["weed"], out=lambda _: None)

    slot = tmp_path / "tools" / f"weed-{pins.SEAWEEDFS_VERSION}-{weed.key('go1.26.8')}"
    assert paths == {"weed": slot / "weed"} and built == ["weed"]
    assert (slot / ".complete").is_file()
    assert not list(tmp_path.glob("engine-*"))
    with pytest.raises(go.EngineError, match="no pinned tool named minio"):
        build.build_tools(tmp_path, ["minio"], out=lambda _: None)


def test_a_warm_build_only_hashes_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "go_version", lambda environ: "go1.26.8")
    built = tmp_path / f"engine-{pins.engine_key('go1.26.8')}"
    built.mkdir()
    (built / ".complete").write_text("{}\n")
    said: list[str] = []

    assert build.build(tmp_path, out=said.append).root == built
    assert said == [f"engine: ready (cached) in {built}"]


def test_a_long_step_reports_progress_with_its_elapsed_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(go, "HEARTBEAT_SECONDS", 0.2)
    said: list[str] = []
    builder = go.Builder(tmp_path, {"PATH": "/usr/bin:/bin"}, said.append)

    builder.run("kwok build", [sys.executable, "-c", "import time; time.sleep(0.7)"], tmp_path)

    assert len(said) >= 2 and all(
        re.fullmatch(r"engine:   kwok build \.\.\. \d+s", s) for s in said
    )


@pytest.mark.parametrize(
    ("log", "says"),
    [
        (
            'go: github.com/x@v1: Get "https://proxy.golang.org/x": dial tcp: lookup proxy.golang.org: no such host',
            "could not be reached",
        ),
        (
            "reading https://proxy.golang.org/x/@v/v9.mod: 403 Forbidden\n\tThis module version is not available",
            "refused a pinned module",
        ),
        ("main.go:3:2: undefined: x", "failed; the last lines"),
    ],
)
def test_a_failed_step_names_its_cause(tmp_path: Path, log: str, says: str) -> None:
    builder = go.Builder(tmp_path, {"PATH": "/usr/bin:/bin", "GOPROXY": "P"}, lambda _: None)
    script = textwrap.dedent(f"""
        import sys
        sys.stderr.write({log!r})
        sys.exit(1)
    """)
    with pytest.raises(go.EngineError) as failed:
        builder.run("etcd build", [sys.executable, "-c", script], tmp_path)
    assert says in str(failed.value)
    assert "etcd build" in str(failed.value)


def test_the_engine_never_holds_the_s3_server_which_the_real_tier_builds_apart() -> None:
    """`make lab` builds the engine only; SeaweedFS (5-14 min cold) is the real tier's alone."""
    assert pins.S3_SERVER.name == "weed"
    assert "weed" not in {tool.name for tool in pins.TOOLS}
    assert pins.S3_SERVER in pins.ALL_TOOLS
