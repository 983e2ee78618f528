"""The A/B orchestrator."""
