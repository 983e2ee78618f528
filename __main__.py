"""Cosmos3 Nano Reasoner on Dynamo: stack config -> settings -> Recipe -> stack outputs."""

import signal

import pulumi
from pulumi.runtime import config as runtime_config

from components import live as cluster
from components.config_parser import ConfigError, parse_stack_config
from components.provider import kubernetes_provider
from components.recipe import Recipe
from components.secrets import SecretValues
from components.settings import PROJECT

# The engine stops the language host's process group, this program with it, by SIGINT when an
# update is cancelled (pulumi's cmdutil.TerminateProcessGroup). The program holds nothing of its
# own to clean up, so it ends at once instead of printing a KeyboardInterrupt traceback from
# wherever it was, which pulumi would show among the update's diagnostics.
signal.signal(signal.SIGINT, signal.SIG_DFL)

# All config is validated before any resource exists; the secrets stay secret Outputs.
raw = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
secret_keys = set(runtime_config.get_config_secret_keys_env())
secret_keys |= {key for key in raw if runtime_config.is_config_secret(key)}
try:
    settings = parse_stack_config(raw, secret_keys)
except ConfigError as error:
    # RunError: the language host prints `error: <message>`, without a traceback.
    raise pulumi.RunError(str(error)) from None
secrets: SecretValues | None = None
if settings.manages_secrets:
    config = pulumi.Config(PROJECT)
    password = config.get_secret("registryPassword") if settings.uses_registry_mirror else None
    # No key from config when an existing Secret holds it (ngcApiKeyFrom).
    ngc_api_key = config.require_secret("ngcApiKey") if settings.creates_ngc_secret else None
    secrets = SecretValues(ngc_api_key, password)
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
