"""The offline tools against hostile input (issue 20): `tools.render`, `tools.golden`,
`tools.validate`, `tools.layer_ready`. A folder or file of the user's is never
replaced, stack config that cannot deploy is refused naming its key before anything is written
(system namespaces, absurd numbers, oversized values, credentials in plain keys), a canary
planted in config never reaches anything printed or written, and no input ends in a traceback.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import REPO_ROOT
from components import k8s_values as k8s
from tests.support import quiet_about_aborted_programs
from tests.tally import flag, record, run_command, texts_below
from tools import golden, layer_ready, render, validate

# Hundreds of generated hostile cases (issue 20), each a whole command: seconds in all.
pytestmark = pytest.mark.slow

PROJECT = "cosmos3-nano-reasoner"
PROPERTIES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def digests(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


@pytest.fixture(autouse=True)
def quiet_aborted_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tools run each program on a new event loop; one a refusal aborted leaves futures
    behind whose error the test asserted already."""
    new_event_loop = asyncio.new_event_loop

    def quiet() -> asyncio.AbstractEventLoop:
        loop = new_event_loop()
        loop.set_exception_handler(quiet_about_aborted_programs)
        return loop

    monkeypatch.setattr(asyncio, "new_event_loop", quiet)


def render_argv(out: Path, *sets: str, stack: str = "dev") -> list[str]:
    return ["--stack", stack, "--example-site", *(f"--set={s}" for s in sets), "--out", str(out)]


# --- never a file of the user's ---------------------------------------------------------------

USER_FILES = {
    "Pulumi.yaml": b"name: my-project\nruntime: python\n",
    "Pulumi.prod.yaml": b"config:\n  my:secret:\n    secure: v1:AAAA\n",
    "deploy.yaml": b"kind: ConfigMap\n",
    "01-namespace-mine.yaml": b"kind: Namespace\n",
    "outputs.json": b'{"mine": true}\n',
    "README.md": b"# mine\n",
}


@PROPERTIES
@given(names=st.lists(st.sampled_from(sorted(USER_FILES)), min_size=1, unique=True))
def test_the_render_never_replaces_a_users_file(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    out = tmp_path_factory.mktemp("users-folder")
    for name in names:
        (out / name).write_bytes(USER_FILES[name])
    before = digests(out)

    status, _, err = run_command("user files (tools)", render.main, render_argv(out))

    changed = [name for name, digest in before.items() if digests(out).get(name) != digest]
    flag("user files (tools)", "deleted", len(changed))
    assert changed == []
    assert status == 2 and f"--out {out} holds files" in err, err


@pytest.mark.parametrize("out", [".", "..", "/", "manifests", "docs", "components"])
def test_the_render_never_writes_into_the_project(out: str) -> None:
    root = REPO_ROOT
    before = digests(root / "manifests")

    status, _, err = run_command("user files (tools)", render.main, render_argv(root / out))

    assert status == 2 and f"--out {root / out}" in err
    assert digests(root / "manifests") == before


def test_the_render_replaces_its_own_files_and_removes_only_those_it_listed(tmp_path: Path) -> None:
    out = tmp_path / "render"
    assert run_command("user files (tools)", render.main, render_argv(out))[0] == 0
    first = set(digests(out))
    assert run_command("user files (tools)", render.main, render_argv(out, stack="shared"))[0] == 0
    assert "06-dynamographdeployment-cosmos3-nano-reasoner-agg-h200-round-robin.yaml" in first
    assert not (
        out / "06-dynamographdeployment-cosmos3-nano-reasoner-agg-h200-round-robin.yaml"
    ).exists()
    assert (
        json.loads((out / ".written-files.json").read_text())["writer"] == "python -m tools.render"
    )


def test_golden_refuses_a_stray_file_in_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "manifests"
    (copy / "shared").mkdir(parents=True)
    for path in (golden.MANIFESTS / "shared").iterdir():
        (copy / "shared" / path.name).write_bytes(path.read_bytes())
    (copy / "shared" / "99-configmap-mine.yaml").write_text("kind: ConfigMap\n")
    monkeypatch.setattr(golden, "MANIFESTS", copy)

    status, _, err = run_command(
        "user files (tools)", golden.main, ["--update", "--stack", "shared"]
    )

    assert status == 2 and "99-configmap-mine.yaml" in err
    assert (copy / "shared" / "99-configmap-mine.yaml").read_text() == "kind: ConfigMap\n"


# --- config that cannot deploy, refused by its key ----------------------------------------------

SYSTEM = [*sorted(k8s.SYSTEM_NAMESPACES), "kube-flannel", "kube-mine"]


@pytest.mark.parametrize("create", ["true", "false"])
@pytest.mark.parametrize("namespace", SYSTEM)
def test_a_namespace_the_cluster_owns_is_refused(
    tmp_path: Path, namespace: str, create: str
) -> None:
    argv = render_argv(tmp_path / "r", f"namespace={namespace}", f"createNamespace={create}")

    status, _, err = run_command("system namespaces", render.main, argv)

    assert status == 2 and f"{PROJECT}:namespace: is a namespace the cluster owns" in err
    assert not (tmp_path / "r").exists()


NUMERIC_KEYS = [
    "workerReplicas",
    "workerGpus",
    "modelDownloadGpus",
    "modelDownloadTimeoutSeconds",
    "graphReadyTimeoutSeconds",
    "graphUpdateTimeoutSeconds",
    "sessionAffinityTtlSeconds",
]
ABSURD = [
    "1e308",
    "100000",
    "99999999999999999999",
    "-1",
    "0x10",
    "inf",
    "nan",
    "1.5",
    "",
    str(2**63),
    "9" * 5000,
    "\u0663",
]


@pytest.mark.parametrize("value", ABSURD)
@pytest.mark.parametrize("key", NUMERIC_KEYS)
def test_an_absurd_number_in_config_is_refused_naming_the_key(
    tmp_path: Path, key: str, value: str
) -> None:
    sets = [f"{key}={value}"] + (["profile=session-affinity"] if "Ttl" in key else [])

    status, _, err = run_command(
        "numbers (config)", render.main, render_argv(tmp_path / "r", *sets)
    )

    assert status in {0, 2} and "Traceback" not in err
    if status == 0:  # only a value in range renders
        assert value in {"100000"} and key in {
            "modelDownloadTimeoutSeconds",
            "graphReadyTimeoutSeconds",
            "graphUpdateTimeoutSeconds",
            "sessionAffinityTtlSeconds",
        }
    else:
        assert f"{PROJECT}:{key}" in err


def test_an_oversized_value_is_refused_before_an_object_outgrows_the_api_server(
    tmp_path: Path,
) -> None:
    env = json.dumps([f"V{i}=" + "x" * 1000 for i in range(70)])

    status, _, err = run_command(
        "numbers (config)", render.main, render_argv(tmp_path / "r", f"workerExtraEnv={env}")
    )

    assert status == 2 and f"{PROJECT}:workerExtraEnv: 68 KiB, at most 64 KiB" in err


def test_a_typo_under_the_project_namespace_names_the_nearest_key(tmp_path: Path) -> None:
    status, _, err = run_command(
        "numbers (config)", render.main, render_argv(tmp_path / "r", "workerReplica=3")
    )
    assert status == 2 and f"did you mean {PROJECT}:workerReplicas?" in err


CANARY = "Cn41b8c6e7f3a9d2Zq"
CREDENTIALS = {
    "ngc key": f"nvapi-{CANARY}{CANARY}",
    "url with password": f"https://robot:{CANARY}@mirror.example.com/v2",
    "url with token": f"https://mirror.example.com/x?access_token={CANARY}",
    "aws key": "AKIA" + CANARY.upper()[:16],
    "jwt": f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{CANARY}.c2ln",
    "bearer": f"Bearer {CANARY}.{CANARY}",
}
TEXT_KEYS = [
    "kubeContext",
    "kubeconfigPath",
    "nimModelProfile",
    "workerImage",
    "frontendImage",
    "modelCacheStorageClass",
    "registryUsername",
    "namespace",
    "modelCacheSize",
]
LIST_KEYS = ["workerExtraEnv", "modelDownloadCommand", "workerNodeSelector", "workerTolerations"]


def planted(key: str, credential: str) -> str:
    if key == "workerExtraEnv":
        return json.dumps([f"MIRROR={credential}"])
    if key in LIST_KEYS:
        return json.dumps(["a=b", credential])
    return credential


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
@pytest.mark.parametrize("key", TEXT_KEYS + LIST_KEYS)
def test_a_credential_in_a_plain_key_is_refused_and_never_shown(
    tmp_path: Path, key: str, kind: str
) -> None:
    value = planted(key, CREDENTIALS[kind])
    out = tmp_path / "r"

    status, printed, err = run_command(
        "secrets (config)", render.main, render_argv(out, f"{key}={value}")
    )

    hits = sum(CANARY in text for text in (printed, err, texts_below(out)))
    flag("secrets (config)", "secret", hits)
    assert hits == 0
    # The secret key to use instead: the NGC key's, or for a registry's user:password@ in an
    # image, the mirror's password.
    secret_key = "registryPassword" if key.endswith("Image") and "@" in value else "ngcApiKey"
    assert status == 2 and f"{PROJECT}:{key} holds " in err and secret_key in err, err
    assert not out.exists()


# --- file arguments -------------------------------------------------------------------------------

SHAPES = {
    "missing": None,
    "directory": "dir",
    "fifo": "fifo",
    "/dev/zero": "/dev/zero",
    "binary": bytes(range(256)),
    "json array": b"[]",
    "json number": b"1e308",
    "deep": b"[" * 50_000 + b"]" * 50_000,
    "empty": b"",
    "yaml list": b"- a\n- b\n",
    "huge": "sparse",
}


def shaped(tmp_path: Path, shape: str) -> Path:
    spec = SHAPES[shape]
    path = tmp_path / "input"
    if spec == "dir":
        path.mkdir()
    elif spec == "fifo":
        os.mkfifo(path)
    elif spec == "sparse":
        with path.open("wb") as sparse:
            sparse.truncate(70 * 2**20)  # 70 MiB of nothing, more than any file argument may be
    elif isinstance(spec, str):
        return Path(spec)
    elif spec is not None:
        path.write_bytes(spec)
    return path


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("tool", ["validate --crd", "layer_ready"])
def test_a_file_argument_of_any_shape_ends_with_a_message(
    tmp_path: Path, shape: str, tool: str
) -> None:
    path = shaped(tmp_path, shape)
    main, argv = {
        "validate --crd": (validate.main, ["--stack", "shared", "--crd", str(path)]),
        "layer_ready": (layer_ready.main, [str(path)]),
    }[tool]

    status, printed, err = run_command("file arguments (tools)", main, argv, seconds=60)

    assert status in {1, 2}, (shape, printed, err)
    assert str(path) in printed + err or "never deployed" in printed + err or "no output" in printed
    assert "Traceback" not in err


# --- a full disk, no permission -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [(errno.ENOSPC, "the disk is full"), (errno.EACCES, "permission denied")],
)
def test_a_render_that_cannot_write_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str
) -> None:
    def refuse(*args: object, **kw: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "replace", refuse)

    status, _, err = run_command("causes (tools)", render.main, render_argv(tmp_path / "r"))

    assert status == 1 and f"--out {tmp_path / 'r'}: cannot write ({words}" in err
    record("causes (tools)")
