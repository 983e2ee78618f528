"""The offline tools against the rest of issue 30's hostile input, each case counted
(`tests.tally`, families `rest: ...`):

- `tools.render` refuses what the program refuses (a near-miss config key, an image no runtime
  pulls, a namespace over 63 characters) before anything is written, and accepts the edges;
- a render of a legal mirror stack, its password set as a secret (`secure:`), renders with the
  pull secret masked (it was refused: the render supplied the NGC key's placeholder only);
- `tools.validate --kubeconfig` names a malformed kubeconfig, never a traceback;
- Ctrl-C while a command is still importing, or running, ends it with one line and status 130.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from common import REPO_ROOT
from tests.support import quiet_about_aborted_programs
from tests.tally import flag, record, run_command, texts_below
from tools import render, stack_files, validate
from tools.stack_files import SECRET_PLACEHOLDER

PROJECT = "cosmos3-nano-reasoner"


@pytest.fixture(autouse=True)
def quiet_aborted_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused program leaves futures behind whose error the test asserted already."""
    new_event_loop = asyncio.new_event_loop

    def quiet() -> asyncio.AbstractEventLoop:
        loop = new_event_loop()
        loop.set_exception_handler(quiet_about_aborted_programs)
        return loop

    monkeypatch.setattr(asyncio, "new_event_loop", quiet)


def render_argv(out: Path, *sets: str, stack: str = "dev") -> list[str]:
    return ["--stack", stack, "--example-site", *(f"--set={s}" for s in sets), "--out", str(out)]


def printable(text: str) -> bool:
    return all(c.isprintable() or c == "\n" for c in text)


# --- what the render refuses, and what it still takes -------------------------------------------

REFUSED = {
    "cosmos3_nano_reasoner:workerReplicas=3": "did you mean cosmos3-nano-reasoner:workerReplicas?",
    "Cosmos3-Nano-Reasoner:workerReplicas=3": "did you mean cosmos3-nano-reasoner:workerReplicas?",
    "cosmos3-nano-reasoner\u200b:workerReplicas=3": "holds the invisible U+200B",
    "worker\u2060Replicas=3": "did you mean cosmos3-nano-reasoner:workerReplicas?",
    "WorkerImage=nvcr.io/x:1": "did you mean cosmos3-nano-reasoner:workerImage?",
    "workerImage=https://nvcr.io/nim/x:1": f"{PROJECT}:workerImage: must be a reference",
    "workerImage=robot:Pw7c0ffee5e1d2Zq@nvcr.io/nim/x:1": "registryPassword",
    "workerImage=nvcr.io/nim/x@sha256:": f"{PROJECT}:workerImage: must have a sha256 digest",
    "frontendImage=nvcr.io/nim/x:": f"{PROJECT}:frontendImage: must have a tag",
    "frontendImage=nvcr.io//x:1": f"{PROJECT}:frontendImage: must have a repository path",
    "namespace=" + "n" * 64: f"{PROJECT}:namespace: must be no more than 63 characters",
    "namespace=Cosmos3": f"{PROJECT}:namespace: must be a lowercase RFC 1123 label",
}


@pytest.mark.parametrize("item", sorted(REFUSED))
def test_the_render_refuses_what_the_program_does_before_writing(tmp_path: Path, item: str) -> None:
    out = tmp_path / "r"

    status, printed, err = run_command("rest: render", render.main, render_argv(out, item))

    flag("rest: render", "secret", int("Pw7c0ffee5e1d2Zq" in printed + err))
    assert status == 2 and REFUSED[item] in err, err
    assert "Pw7c0ffee5e1d2Zq" not in printed + err and printable(err), repr(err)
    assert not out.exists()


@pytest.mark.parametrize(
    "item",
    [
        "namespace=" + "n" * 63,
        "workerImage=localhost:5000/nim/cosmos3:2.1.0",
        "workerImage=reg.io:443/nim/x:2.1.0@sha256:" + "0123456789abcdef" * 4,
        "kubernetes:context=not-ours",
    ],
)
def test_the_render_takes_the_edges(tmp_path: Path, item: str) -> None:
    out = tmp_path / "r"

    status, _printed, err = run_command("rest: render", render.main, render_argv(out, item))

    assert status == 0, err
    key, _, value = item.partition("=")
    if key == "namespace":
        assert (out / f"01-namespace-{value}.yaml").exists()


# --- a legal mirror stack ---------------------------------------------------------------------

MIRROR_STACK = """config:
  cosmos3-nano-reasoner:namespace: mirror-dev
  cosmos3-nano-reasoner:workerReplicas: 1
  cosmos3-nano-reasoner:registryServer: {server}
  cosmos3-nano-reasoner:registryUsername: puller
  cosmos3-nano-reasoner:registryPassword:
    secure: v1:AAAAAAAAAAAAAAAA:bm90LWEtcmVhbC1jaXBoZXJ0ZXh0
"""


@pytest.fixture
def project_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project files the render reads, in a folder of the test's: a stack file may be added."""
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(REPO_ROOT / "Pulumi.yaml", folder / "Pulumi.yaml")
    for stack in stack_files.SHIPPED_STACKS:
        shutil.copy(REPO_ROOT / f"Pulumi.{stack}.yaml", folder / f"Pulumi.{stack}.yaml")
    monkeypatch.setattr(stack_files, "REPO_ROOT", folder)
    return folder


@pytest.mark.parametrize(
    "server", ["mirror.example.com", "mirror.example.com:5000", "localhost:5000", "10.0.0.7:443"]
)
def test_a_mirror_stack_with_its_password_as_a_secret_renders_masked(
    project_copy: Path, tmp_path: Path, server: str
) -> None:
    (project_copy / "Pulumi.dev.yaml").write_text(MIRROR_STACK.format(server=server))
    out = tmp_path / "r"

    status, _printed, err = run_command("rest: mirror render", render.main, render_argv(out))

    written = texts_below(out)
    auth = base64.b64encode(f"puller:{SECRET_PLACEHOLDER}".encode()).decode()
    leaked = sum(secret in written for secret in (SECRET_PLACEHOLDER, auth))
    flag("rest: mirror render", "secret", leaked)
    assert status == 0, err
    pull_secret = yaml.safe_load((out / "03-secret-registry-pull-secret.yaml").read_text())
    assert pull_secret["stringData"] == {".dockerconfigjson": "<secret>"}
    assert leaked == 0


def test_a_profile_stack_that_sets_the_layers_password_is_still_refused(
    project_copy: Path, tmp_path: Path
) -> None:
    stack = (project_copy / "Pulumi.round-robin.yaml").read_text()
    secret = "  cosmos3-nano-reasoner:registryPassword:\n    secure: v1:AAAA:bm90\n"
    (project_copy / "Pulumi.round-robin.yaml").write_text(stack + secret)
    out = tmp_path / "r"

    status, _printed, err = run_command(
        "rest: mirror render", render.main, render_argv(out, stack="round-robin")
    )

    assert status == 2 and "set on a stack that reads them" in err, err


# --- tools.validate and a malformed kubeconfig ----------------------------------------------------

KUBECONFIGS = {
    "not yaml": "a: [",
    "a list": "- 1\n",
    "binary": bytes(range(256)),
    "server a number": (
        "clusters:\n- name: c\n  cluster: {server: 5}\ncontexts:\n- name: named\n"
        "  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {}\n"
    ),
    "fifo": None,
}


@pytest.mark.slow  # each validate renders the stack first
@pytest.mark.parametrize("shape", sorted(KUBECONFIGS))
def test_validate_names_a_malformed_kubeconfig(tmp_path: Path, shape: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    spec = KUBECONFIGS[shape]
    if spec is None:
        os.mkfifo(kubeconfig)
    elif isinstance(spec, bytes):
        kubeconfig.write_bytes(spec)
    else:
        kubeconfig.write_text(spec)
    argv = ["--stack", "dev", f"--kubeconfig={kubeconfig}", "--context=named"]

    status, _printed, err = run_command("rest: kubeconfig", validate.main, argv)

    assert status == 2 and "Traceback" not in err, err
    # Refused by the bounded reader (not a regular file, not text, not YAML) or by the client.
    assert err.startswith("validate: ") and str(kubeconfig) in err, err


# --- Ctrl-C --------------------------------------------------------------------------------------

INTERRUPTER = """
import importlib.abc, os, signal, sys

class _Interrupter(importlib.abc.MetaPathFinder):
    # Ctrl-C, delivered the moment the command imports one module: a deterministic early interrupt.
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["INTERRUPT_AT_IMPORT"]:
            sys.meta_path.remove(self)
            open(os.environ["INTERRUPT_MARK"], "w").close()
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _Interrupter())
"""
COMMANDS = {
    "tools.render": ["--stack", "dev", "--example-site", "--out", "{out}"],
    "stages": ["smoke", "--dry-run", "--outputs", str(REPO_ROOT / "manifests/dev/outputs.json")],
    "tools.validate": ["--stack", "dev", "--kubeconfig", "{out}/missing"],
    "lab": ["--help"],
}
INTERRUPTED_AT = [
    ("tools.render", "yaml"),
    ("tools.render", "pydantic"),
    ("tools.render", "pulumi"),
    ("tools.render", "grpc"),
    ("tools.render", "tools.offline"),
    ("tools.render", "components.recipe"),  # inside the program, under Pulumi's mock runtime
    ("tools.render", "components.layer_manifests"),
    ("stages", "stages.cli"),
    ("stages", "components.contract"),
    ("stages", "yaml"),
    ("tools.validate", "kubernetes"),
    ("tools.validate", "tools.golden"),
    ("lab", "lab.planner"),
]


@pytest.mark.slow  # a new interpreter per case
@pytest.mark.parametrize(("command", "module"), INTERRUPTED_AT)
def test_ctrl_c_ends_a_command_with_one_line_and_130(
    tmp_path: Path, command: str, module: str
) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(INTERRUPTER)
    mark = tmp_path / "interrupted"
    env = os.environ | {
        "PYTHONPATH": str(tmp_path / "site"),
        "INTERRUPT_AT_IMPORT": module,
        "INTERRUPT_MARK": str(mark),
    }
    argv = [arg.replace("{out}", str(tmp_path / "out")) for arg in COMMANDS[command]]

    done = subprocess.run(
        [sys.executable, "-m", command, *argv],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    lines = [line for line in done.stderr.splitlines() if line.strip()]
    record("rest: interrupts", traceback=int("Traceback" in done.stderr))
    assert mark.exists(), f"{module} was imported before the command started (or never)"
    assert done.returncode == 130, done.stderr  # 128 + SIGINT, as a shell reports Ctrl-C
    assert lines == [f"python -m {command}: interrupted"], done.stderr
