#!/usr/bin/env bash
# Site config and secrets on this runner's copy of a stack's config (never committed):
#   scripts/site-config.sh <org>/cosmos3-nano-reasoner/<stack>
# Creates the stack when it does not exist. Every stack gets kubeContext; the stacks that own the
# shared layer (dev, shared) also get the storage class and the NGC key, which goes through stdin:
# never on a command line, never in the log.
# Reads: KUBE_CONTEXT, and for dev/shared MODEL_CACHE_STORAGE_CLASS and NGC_API_KEY.
set -euo pipefail
stack="$1"
: "${KUBE_CONTEXT:?set the repository variable KUBE_CONTEXT (the kubeconfig context)}"
pulumi stack select --create "$stack"
pulumi config set kubeContext "$KUBE_CONTEXT" --stack "$stack"
case "${stack##*/}" in
  dev | shared)
    : "${MODEL_CACHE_STORAGE_CLASS:?set the repository variable MODEL_CACHE_STORAGE_CLASS}"
    : "${NGC_API_KEY:?set the repository secret NGC_API_KEY}"
    pulumi config set modelCacheStorageClass "$MODEL_CACHE_STORAGE_CLASS" --stack "$stack"
    printf '%s' "$NGC_API_KEY" | pulumi config set --secret ngcApiKey --stack "$stack"
    ;;
esac
