"""Routing: the one place where a routing profile becomes frontend behaviour.

The two recipe profiles differ only here. `frontend_args` is used for the DynamoGraphDeployment's
Frontend container and, unchanged, for the local lab's frontend process, so the lab exercises
exactly the routing the cluster gets.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

SESSION_HEADER = "X-Dynamo-Session-ID"
"""Client header that names a session; the frontend pins a session to one worker when affinity is on."""

RECIPE_AFFINITY_TTL_SECONDS = 300
"""The recipe's per-video affinity: one video's questions arrive within 300 s of each other."""

MIN_AFFINITY_TTL_SECONDS = 1
MAX_AFFINITY_TTL_SECONDS = 31_536_000
"""Range the Dynamo frontend accepts for --router-session-affinity-ttl-secs (FrontendConfig.validate)."""


class RoutingProfile(StrEnum):
    ROUND_ROBIN = "round-robin"
    SESSION_AFFINITY = "session-affinity"


@dataclass(frozen=True)
class Routing:
    """How the frontend spreads requests: round robin, optionally pinned per session for a TTL."""

    profile: RoutingProfile
    affinity_ttl_seconds: int | None

    def __post_init__(self) -> None:
        has_affinity = self.profile is RoutingProfile.SESSION_AFFINITY
        if has_affinity and self.affinity_ttl_seconds is None:
            raise ValueError("the session-affinity profile needs an affinity TTL")
        if not has_affinity and self.affinity_ttl_seconds is not None:
            raise ValueError("the round-robin profile has no affinity TTL")
        ttl = self.affinity_ttl_seconds
        if ttl is not None and not MIN_AFFINITY_TTL_SECONDS <= ttl <= MAX_AFFINITY_TTL_SECONDS:
            raise ValueError(
                f"affinity TTL {ttl} s is outside {MIN_AFFINITY_TTL_SECONDS}..{MAX_AFFINITY_TTL_SECONDS}"
            )

    @property
    def session_header(self) -> str | None:
        """The header a client sends per session, or None when the profile ignores sessions."""
        return SESSION_HEADER if self.affinity_ttl_seconds is not None else None


def routing_for(profile: RoutingProfile | str, affinity_ttl_seconds: int) -> Routing:
    """The routing of a profile; the TTL applies only to the session-affinity profile."""
    profile = RoutingProfile(profile)
    ttl = affinity_ttl_seconds if profile is RoutingProfile.SESSION_AFFINITY else None
    return Routing(profile=profile, affinity_ttl_seconds=ttl)


def frontend_args(routing: Routing) -> list[str]:
    """Arguments of `python -m dynamo.frontend` for a routing profile.

    Round robin is named explicitly (it is also the frontend's default) so the manifest says what it
    does. The affinity flag appears only for the session-affinity profile: the round-robin recipe
    manifest sets no session-affinity flag at all. Host and port are left to the environment
    (DYN_HTTP_HOST, DYN_HTTP_PORT), which the operator sets on the cluster and the lab on loopback.
    """
    args = ["--router-mode", "round-robin"]
    if routing.affinity_ttl_seconds is not None:
        args += [
            "--router-session-affinity-ttl-secs",
            str(routing.affinity_ttl_seconds),
        ]
    return args
