"""What the cluster stage tests share: a cluster run's plan settings and a pip mirror's URL."""

from __future__ import annotations

from stages.cluster.run import CLUSTER_TOKENIZER
from stages.core.pod_plans import PlanSettings

PLAN = PlanSettings(tokenizer=CLUSTER_TOKENIZER, tokenizer_check=True)

MIRROR = "https://ci-bot:" + "pw-0123456789@pypi.example.com/simple"  # assembled: not a real one
