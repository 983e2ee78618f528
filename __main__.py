"""Cosmos3 Nano Reasoner on Dynamo: stack config -> settings -> Recipe -> stack outputs."""

import signal

import pulumi

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
recipe = Recipe(
    "cosmos3",
    settings,
    secrets,
    opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
)
for key, value in recipe.outputs.items():
    pulumi.export(key, value)
