"""The local cluster's folder: `up` claims it, `down` stops only what it finds `up` recorded there.

A folder is the cluster's when `up` made it: its first write is the `.cosmos3-local-cluster` mark,
and `up` refuses a non-empty folder without it. `down` (through `attach`) asks the same before it
reads `cluster.json`, and reads that file as data: a component `up` never starts, a binary of
another name, a PID that is no single process, or a file that is not JSON is refused with a
message, and nothing is stopped on its word. No name `up` writes or removes there may be a link
(`common.confined_paths`): a link is refused before anything is removed, never followed.
"""

from __future__ import annotations

from pathlib import Path

from common.confined_paths import OutputFolderError, inside, remove_tree_inside, write_inside
from common.input_files import MAX_STATE_BYTES, InputFileError, InputFileMissing, read_json_object
from testenv.cluster import processes

OWNER_MARK = ".cosmos3-local-cluster"
"""Written first into a cluster folder: `up` refuses a non-empty folder without it."""
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
STALE_PARTS = ("etcd", "pki", "cluster.json", "env.sh", "kubeconfig")
"""What a new `up` removes of the last one's (its logs stay)."""
WRITTEN_PARTS = (OWNER_MARK, *STALE_PARTS, "kwok-stages.yaml", "logs", "kube-cache")
"""Every name `up` writes below its folder: none may be a link."""
MAX_PID = 1 << 22
"""Linux's largest `pid_max`."""


class ClusterError(Exception):
    """The cluster cannot start or stop; the message says why and what to do."""


def made_by_up(folder: Path) -> bool:
    """`folder` carries the mark `up` writes first (a file of its own, not a link to one)."""
    mark = folder / OWNER_MARK
    return mark.is_file() and not mark.is_symlink()


def read_state(folder: Path) -> tuple[str, list[processes.Started]] | None:
    """The server and components `cluster.json` records, or None when there is none; a file that
    is not what `up` writes is refused (`ClusterError`), naming it."""
    path = folder / "cluster.json"
    try:
        inside(folder, "cluster.json")
        state = read_json_object(path, "cluster state file", MAX_STATE_BYTES)
        server = state["server"]
        started = [processes.Started.from_json(item) for item in state["components"]]
        if not isinstance(server, str):
            raise TypeError("its server is not a URL")
        for item in started:
            _must_be_a_component(item)
    except (FileNotFoundError, InputFileMissing):
        return None
    except OutputFolderError as error:
        raise ClusterError(str(error)) from None
    except InputFileError as error:  # not a regular file, or past its limit: never read whole
        raise ClusterError(f"{error}: not what `testenv.cluster up` writes") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ClusterError(
            f"{path} is not a cluster.json that `up` wrote ({error or type(error).__name__}): "
            "nothing is stopped on its word; stop the components yourself, then remove it"
        ) from None
    return server, started


def _must_be_a_component(item: processes.Started) -> None:
    """A component `up` starts, by its name and binary, at a PID that can be one process."""
    if item.name not in COMPONENTS or Path(item.binary).name != item.name:
        raise ValueError(f"{item.name!r} at {item.binary!r} is not a component `up` starts")
    if not 2 <= item.pid <= MAX_PID:
        raise ValueError(f"PID {item.pid} of {item.name} is no process of its own")


def claim_folder(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise ClusterError(f"--out {folder} is a file, not a folder: give a new or empty folder")
    if folder.exists() and any(folder.iterdir()) and not made_by_up(folder):
        raise ClusterError(
            f"--out {folder} is not empty and was not made by `testenv.cluster up`: give an empty "
            "or new folder (nothing in it is touched)"
        )
    if folder.exists():
        _refuse_links(folder)
    state = read_state(folder) if folder.exists() else None
    if state is not None:
        running = [item.name for item in state[1] if processes.runs(item)]
        if running:
            raise ClusterError(
                f"a cluster is already running from {folder} ({', '.join(running)}): "
                f"`python -m testenv.cluster down --out {folder}` first"
            )
    try:
        for stale_part in STALE_PARTS:
            remove_tree_inside(folder, stale_part)
    except OutputFolderError as error:
        raise ClusterError(str(error)) from None
    folder.mkdir(parents=True, exist_ok=True)
    write_inside(folder, OWNER_MARK, "made by python -m testenv.cluster up\n")


def _refuse_links(folder: Path) -> None:
    """No name `up` writes (nor a log) is a link: refused before anything is removed."""
    try:
        for name in WRITTEN_PARTS:
            inside(folder, name)
        logs = folder / "logs"
        if logs.is_dir():
            for log in logs.iterdir():
                inside(folder, f"logs/{log.name}")
    except OutputFolderError as error:
        raise ClusterError(f"--out {error}") from None
