"""The guardrail policies, run by `pulumi preview --policy-pack policy/analyzer` (and `pulumi up`).

The pack checks what the engine is about to deploy, whatever code produced it: the resource's
inputs (`args.props`, camelCase wire names, secret values already decrypted) and its options
(`args.opts`: protect, custom timeouts). During a preview an input that is not known yet raises
`UnknownValueError` when read; the policy SDK turns that into an advisory note for that policy.

One module per policy, plus `workloads` (reading pod specs and containers). The modules import
each other relatively, because this package has two names: `rules` when the CLI runs the pack
(`policy/__main__.py`, with `policy/` first on sys.path) and `policy.rules` in the tests.

The CLI runs the pack in its own virtualenv (`policy/requirements.txt`, pulumi-policy only), so
nothing here imports the program: only `common`, standard library alone (`policy/__main__.py` puts
the project's root on sys.path), for the masker's rule of a secret's name and its credential
shapes. Tests call each policy's `validate` with `ResourceValidationArgs` built from the
program's real inputs under mocks.
"""

from .gpus import worker_gpus
from .images import image_is_pinned, images_pinned
from .model_cache import model_cache
from .plain_secrets import looks_secret, no_plain_secrets
from .readiness import graph_readiness
from .resource_requests import resource_requests
from .workloads import (
    CLAIM,
    CONFIG_MAP,
    GRAPH,
    JOB,
    SECRET,
    containers,
    worker_main_containers,
)

__all__ = [
    "CLAIM",
    "CONFIG_MAP",
    "GRAPH",
    "JOB",
    "POLICIES",
    "SECRET",
    "containers",
    "graph_readiness",
    "image_is_pinned",
    "images_pinned",
    "looks_secret",
    "model_cache",
    "no_plain_secrets",
    "resource_requests",
    "worker_gpus",
    "worker_main_containers",
]

POLICIES = [
    images_pinned,
    worker_gpus,
    model_cache,
    no_plain_secrets,
    graph_readiness,
    resource_requests,
]
"""Every policy of the pack, in the order the CLI reports them."""
