"""Cosmos3 Nano Reasoner on Dynamo: stack config -> settings -> Recipe -> stack outputs."""

import signal

import pulumi

from components import live as cluster
from components.config_parser import ConfigError
from components.provider import kubernetes_provider
from components.recipe import Recipe
from components.stack_config import load_stack_config

# The engine stops the language host's process group, this program with it, by SIGINT when an
# update is cancelled (pulumi's cmdutil.TerminateProcessGroup). The program holds nothing of its
# own to clean up, so it ends at once instead of printing a KeyboardInterrupt traceback from
# wherever it was, which pulumi would show among the update's diagnostics.
signal.signal(signal.SIGINT, signal.SIG_DFL)

try:
    settings, secrets = load_stack_config()
except ConfigError as error:
    # RunError: the language host prints `error: <message>`, without a traceback.
    raise pulumi.RunError(str(error)) from None
provider = kubernetes_provider("kubernetes", settings)
# The live cluster, through the provider's kubeconfig and context, read only (components/live.py).
live = cluster.Live(
    cluster.connect(settings.kube_context, settings.kubeconfig_path), pulumi.log.warn
)
recipe = Recipe(
    "cosmos3",
    settings,
    secrets,
    live,
    opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
)
for key, value in recipe.outputs.items():
    pulumi.export(key, value)
