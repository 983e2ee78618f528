"""The lab's pass-through in front of several frontends (lab/pass_through.py): each connection goes
to the frontend its session header hashes to, or to one at random; a request's bytes arrive whole.
Stand-in upstreams on loopback record what reached them."""

from __future__ import annotations

import http.client
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.routing import (
    RECIPE_AFFINITY_TTL_SECONDS,
    SESSION_HEADER,
    RoutingProfile,
    routing_for,
)
from lab.graph import MAX_FRONTENDS, PASS_THROUGH, GraphSpec
from lab.pass_through import FrontendChoice, session_id
from tests.support import StandInHandler, stand_in_server

HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Dynamo-Session-ID:  video-7 \r\n\r\n"


def test_the_session_is_read_from_the_head_whatever_its_case() -> None:
    assert session_id(HEAD) == b"video-7"
    assert session_id(HEAD.replace(b"X-Dynamo-Session-ID", b"x-dynamo-session-id")) == b"video-7"
    assert session_id(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") is None
    assert session_id(b"GET /x-dynamo-session-id: 1 HTTP/1.1\r\n\r\n") is None  # not a header
    assert SESSION_HEADER.lower().encode() == b"x-dynamo-session-id"


def test_hashing_keeps_a_session_on_one_frontend_and_spreads_the_sessions() -> None:
    choice = FrontendChoice([1001, 1002, 1003], hashing=True)
    heads = [HEAD.replace(b"video-7", f"video-{n}".encode()) for n in range(60)]

    chosen = [choice.choose(head) for head in heads]

    assert chosen == [choice.choose(head) for head in heads]  # again: the same frontends
    assert set(chosen) == {1001, 1002, 1003}
    no_session = b"GET /v1/models HTTP/1.1\r\n\r\n"
    assert [choice.choose(no_session) for _ in range(3)] == [1001, 1002, 1003]  # in turn


def test_without_hashing_a_session_meets_every_frontend_as_seeded() -> None:
    def forty_choices() -> list[int]:
        choice = FrontendChoice([1001, 1002], hashing=False)
        return [choice.choose(HEAD) for _ in range(40)]

    chosen = forty_choices()

    assert set(chosen) == {1001, 1002}
    assert forty_choices() == chosen  # seeded: a run repeats


class Echo(StandInHandler):
    """Answers with the port it listens on and the session header it got."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        address = self.server.server_address
        assert isinstance(address, tuple)  # a TCP server: (host, port)
        port = address[1]
        session = self.headers.get(SESSION_HEADER, "")
        self.send_body(200, "text/plain", f"{port} {session} {len(body)}".encode())


@pytest.fixture
def frontends() -> Iterator[list[int]]:
    with stand_in_server(Echo) as first, stand_in_server(Echo) as second:
        yield [first, second]


def _started(tmp_path: Path, choice: str, ports: list[int]) -> tuple[subprocess.Popen[bytes], int]:
    port_file = tmp_path / f"{choice}.port"
    argv = [sys.executable, "-S", "-E", "-B", str(PASS_THROUGH), str(port_file), "0", choice]
    process = subprocess.Popen([*argv, *map(str, ports)])
    deadline = time.monotonic() + 10
    while not port_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return process, int(port_file.read_text())


def _ask(port: int, session: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(
        "POST", "/v1/chat/completions", body=b"x" * 100_000, headers={SESSION_HEADER: session}
    )
    answer = connection.getresponse().read().decode()
    connection.close()
    return answer


@pytest.mark.parametrize("choice", ["hash", "random"])
def test_the_pass_through_forwards_whole_requests(
    tmp_path: Path, frontends: list[int], choice: str
) -> None:
    process, port = _started(tmp_path, choice, frontends)
    try:
        answers = {
            session: {_ask(port, session) for _ in range(6)} for session in ("a", "b", "c", "d")
        }
    finally:
        process.terminate()
        process.wait(10)

    for session, seen in answers.items():
        assert all(a.endswith(f" {session} 100000") for a in seen), seen  # every byte arrived
    reached = {answer.split()[0] for seen in answers.values() for answer in seen}
    assert reached == {str(p) for p in frontends}
    kept = all(len(seen) == 1 for seen in answers.values())
    assert kept == (choice == "hash")  # hashed: one frontend a session; random: both (seeded)


def test_a_graph_takes_one_to_four_frontends() -> None:
    routing = routing_for(RoutingProfile.SESSION_AFFINITY, RECIPE_AFFINITY_TTL_SECONDS)
    for frontends in (0, MAX_FRONTENDS + 1):
        with pytest.raises(ValueError, match=f"1 to {MAX_FRONTENDS} frontends"):
            GraphSpec(routing=routing, frontends=frontends)
    assert GraphSpec(routing=routing, frontends=MAX_FRONTENDS).frontends == MAX_FRONTENDS
