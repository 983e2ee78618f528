"""Keep the lab's sockets off the machine's network: `lab ab` runs in a network namespace of its own.

Everything the lab starts listens on 127.0.0.1 except Dynamo 1.6.1's ZMQ event plane, which binds
its publishers to every interface (`tcp://0.0.0.0:0`, hard-coded; DYN_EVENT_PLANE_HOST only
changes the address it advertises, and the only other event plane is NATS): four sockets per mock
worker. So the lab's commands re-execute themselves under `unshare --user --map-root-user --net`,
in a namespace whose only interface is its own loopback: nothing the lab starts can be reached
from another host, or from this one outside the namespace.

`python -m lab up` stays reachable from your shell: before it re-executes itself it listens on
the machine's 127.0.0.1 (passed on as an open file, `FORWARD_FD_ENV`), and inside it forwards
each connection to its frontend (`port_forward`). Where the machine allows no unprivileged user
namespace (some CI runners), the lab says so and runs on loopback but for the ZMQ sockets; so it
does on a cluster `$COSMOS3_CLUSTER` names by kubeconfig, which the namespace could not reach.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from collections.abc import Sequence

from lab.pass_through import forward_connections, loopback_listener
from testenv import ENV_CLUSTER, named_kubeconfig
from testenv.netns import UNSHARE, can_isolate, loopback_up

ISOLATED_ENV = "LAB_NETWORK_NAMESPACE"
"""Set inside the namespace (also to `off` to opt out of isolating)."""
FORWARD_FD_ENV = "LAB_FORWARD_FD"
"""Inside the namespace: the file descriptor of `lab up`'s listening socket on the machine."""
ZMQ_WARNING = (
    "lab: note: Dynamo's ZMQ event plane binds 4 sockets per worker on all interfaces (no setting "
    "in Dynamo 1.6.1); everything else listens on 127.0.0.1"
)


def run_isolated(argv: Sequence[str], forward: bool = False) -> None:
    """Re-execute `python -m lab argv` in a network namespace of its own, when possible; inside
    it, bring the loopback up and return. Returns too (after saying why) when it cannot isolate.

    `forward`: first listen on the machine's 127.0.0.1, for `forwarded_listener` inside."""
    state = os.environ.get(ISOLATED_ENV)
    if state == "inside":
        loopback_up()
        return
    if state == "off":
        return
    if named_kubeconfig() is not None:  # a cluster on the machine's network, not the namespace's
        print(
            f"{ZMQ_WARNING}; the lab runs outside a network namespace of its own, to reach the "
            f"cluster ${ENV_CLUSTER} names",
            file=sys.stderr,
        )
        return
    if not can_isolate():
        print(
            f"{ZMQ_WARNING}; this machine allows no user network namespace to isolate them "
            f"(set {ISOLATED_ENV}=off to silence this)",
            file=sys.stderr,
        )
        return
    env = os.environ | {ISOLATED_ENV: "inside"}
    if forward:
        listener = loopback_listener()
        listener.set_inheritable(True)  # survives both execs: unshare's, then Python's
        env[FORWARD_FD_ENV] = str(listener.fileno())
    command = [*UNSHARE, "--", sys.executable, "-m", "lab", *argv]
    os.execvpe(UNSHARE[0], command, env)


def forwarded_listener() -> socket.socket | None:
    """Inside the namespace: the listening socket `run_isolated(forward=True)` passed on (it
    belongs to the machine's network), or None when there is none."""
    descriptor = os.environ.get(FORWARD_FD_ENV)
    if os.environ.get(ISOLATED_ENV) != "inside" or not descriptor or not descriptor.isdigit():
        return None
    listener = socket.socket(fileno=int(descriptor))
    listener.set_inheritable(False)  # none of the graph's processes may hold it
    return listener


def port_forward(listener: socket.socket, upstream_port: int) -> int:
    """Connections to `listener` forwarded to 127.0.0.1:`upstream_port`, from a daemon thread;
    returns the port they reach."""
    forward = forward_connections(listener, upstream_port)
    threading.Thread(
        target=asyncio.run, args=(forward,), name="lab-port-forward", daemon=True
    ).start()
    return int(listener.getsockname()[1])
