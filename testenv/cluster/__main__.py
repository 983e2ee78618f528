"""`python -m testenv.cluster up --out DIR` and `python -m testenv.cluster down --out DIR`.

python -m testenv.cluster up --out build/cluster     # ready in seconds once `make engine` ran
python -m testenv.cluster up --out build/cluster --crd dgd-crd.yaml   # another CRD (testenv.crd)
source build/cluster/env.sh                        # kubectl, pulumi and KUBECONFIG of it
python -m testenv.cluster down --out build/cluster   # stops what up started, by PID
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from common.output_folders import os_error_reason
from common.parsers import CommandParser
from testenv import cluster, crd
from testenv.engine import EngineError, cache_home, located


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(
        prog="python -m testenv.cluster",
        description="A local control plane (kube-apiserver + kwok GPU nodes) on 127.0.0.1.",
    )
    parser.add_argument("command", choices=("up", "down"))
    parser.add_argument("--out", type=Path, required=True, help="the cluster's folder")
    parser.add_argument(
        "--crd", type=Path, help=f"the {crd.GRAPH_KIND} CRD YAML (default: ${crd.ENV}, else "
        "../shared/reference/ beside the clone)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    # SIGINT and SIGTERM both as Ctrl-C, so an `up` stopped either way stops what it had started
    # (also where a shell started it in the background, with SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        engine = located(cache_home())
        if args.command == "up":
            cluster.up(args.out, engine, crd=crd.crd_path(args.crd))
        else:
            killed = cluster.attach(args.out, engine).down()
            suffix = f" ({', '.join(killed)} needed SIGKILL)" if killed else ""
            print(f"cluster: stopped{suffix}")
    except (EngineError, cluster.ClusterError, crd.CrdError) as error:
        print(f"testenv.cluster {args.command}: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # a folder it may not read or write, a full disk: say which
        where = f" {error.filename}" if error.filename else f" {args.out}"
        reason = os_error_reason(error)
        print(f"testenv.cluster {args.command}: cannot use{where}: {reason}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            f"testenv.cluster {args.command}: interrupted; what it started is stopped",
            file=sys.stderr,
        )
        return 130
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
