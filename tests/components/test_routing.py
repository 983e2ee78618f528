import pytest

from components.routing import (
    SESSION_HEADER,
    Routing,
    RoutingProfile,
    frontend_args,
    routing_for,
)


def test_round_robin_sets_no_affinity_flag_and_no_header() -> None:
    routing = routing_for("round-robin", 300)
    assert frontend_args(routing) == ["--router-mode", "round-robin"]
    assert routing.affinity_ttl_seconds is None
    assert routing.session_header is None


def test_session_affinity_adds_the_ttl_and_the_session_header() -> None:
    routing = routing_for(RoutingProfile.SESSION_AFFINITY, 300)
    assert frontend_args(routing) == [
        "--router-mode",
        "round-robin",
        "--router-session-affinity-ttl-secs",
        "300",
    ]
    assert routing.session_header == SESSION_HEADER == "X-Dynamo-Session-ID"


def test_the_two_profiles_differ_only_by_the_affinity_flag() -> None:
    plain = frontend_args(routing_for("round-robin", 42))
    pinned = frontend_args(routing_for("session-affinity", 42))
    assert pinned[: len(plain)] == plain
    assert pinned[len(plain) :] == ["--router-session-affinity-ttl-secs", "42"]


@pytest.mark.parametrize("ttl", [0, 31_536_001])
def test_affinity_ttl_outside_the_frontend_range_is_refused(ttl: int) -> None:
    with pytest.raises(ValueError, match="outside 1..31536000"):
        routing_for("session-affinity", ttl)


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="round-robbin"):
        routing_for("round-robbin", 300)


def test_round_robin_with_a_ttl_is_inconsistent() -> None:
    with pytest.raises(ValueError, match="no affinity TTL"):
        Routing(RoutingProfile.ROUND_ROBIN, 300)
