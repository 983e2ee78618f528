"""images-pinned: every container names a version tag or a digest, never `latest` or nothing."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from .workloads import containers, dotted, mandatory


def image_is_pinned(image: str) -> bool:
    """A digest (`...@sha256:...`), or a tag that is not `latest`. `registry:5000/repo` has no tag."""
    if "@" in image:
        return True
    last_component = image.rsplit("/", 1)[-1]
    _, colon, tag = last_component.partition(":")
    return bool(colon and tag) and tag != "latest"


@mandatory(
    "images-pinned",
    "Every container of Jobs and of the DynamoGraphDeployment names a version tag or digest.",
)
def images_pinned(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for path, container in containers(args.resource_type, args.props):
        image = container.get("image")
        if not isinstance(image, str) or not image_is_pinned(image):
            report_violation(
                f"{dotted((*path, 'image'))}: image {image!r} is not pinned; name a version tag "
                "(not `latest`) or a digest, so every node runs the image that was reviewed",
                None,
            )
