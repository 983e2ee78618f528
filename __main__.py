"""Cosmos3 Nano Reasoner on Dynamo: stack config -> settings -> Recipe -> stack outputs."""

import pulumi

from components.config_parser import ConfigError
from components.provider import kubernetes_provider
from components.recipe import Recipe
from components.stack_config import load_stack_config

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
