"""model-cache-rwx-protected: the model cache claim is ReadWriteMany and protected."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from .workloads import CLAIM, entries, get_at, mandatory


@mandatory(
    "model-cache-rwx-protected",
    "The model cache PersistentVolumeClaim is ReadWriteMany and protected.",
)
def model_cache(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Every claim this program creates is the model cache: shared by all workers, and expensive
    to lose (a multi-GB download), so ReadWriteMany and protected from delete and replacement."""
    if args.resource_type != CLAIM:
        return
    modes = entries(get_at(args.props, ("spec", "accessModes")))
    if "ReadWriteMany" not in modes:
        report_violation(
            f"spec.accessModes: the model cache must be ReadWriteMany (every worker mounts it), got {modes}",
            None,
        )
    if not args.opts.protect:
        report_violation(
            "the model cache claim must be created with `protect=True`: a destroy or replacement "
            "would delete the downloaded weights",
            None,
        )
