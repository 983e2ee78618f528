"""The Kubernetes API server's own rules for the values stack config lands in. Pure: no Pulumi.

Each function mirrors one Go function of Kubernetes and returns the problems it would report, an
empty list for a value the API server accepts. The sources are chiefly
k8s.io/apimachinery/pkg/util/validation/validation.go (names, label values, env var names),
k8s.io/apimachinery/pkg/api/resource/quantity.go (quantities) and
k8s.io/kubernetes/pkg/apis/core/validation/validation.go (node selectors, tolerations, images,
load-balancer source ranges); also networking/validation (Ingress hosts), policy/validation
(disruption budgets) and apimachinery's path-segment rule (`IsPathSegmentName`).

Problems never contain the value itself: callers decide whether a value may be shown (an env
value may be a secret). Go's `regexp` anchors `^...$` match the whole text; Python's `re.match`
with `$` also accepts a trailing newline, so every rule here is a `fullmatch`.

Over 300 lines: one mirror of the API server's value rules, a short function per Go function,
read side by side with the Go sources above.
"""

from __future__ import annotations

import ipaddress
import re
from decimal import Decimal, InvalidOperation

from components.image_reference import reference_problems, registry_host_problems

INT32_MAX = 2**31 - 1
"""Replica counts and most integers of the Kubernetes API are int32."""
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
"""The namespaces the cluster owns: the NamespaceLifecycle admission plugin's immortal ones
(plugin/pkg/admission/namespace/lifecycle), plus the `kube-` prefix Kubernetes reserves for its
own ("Avoid creating namespaces with the prefix kube-", Namespaces concept page)."""

# validation.go: dns1123LabelFmt, DNS1123LabelMaxLength (IsDNS1123Label).
_DNS1123_LABEL_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_MAX_LENGTH = 63
# validation.go: dns1123SubdomainFmt, DNS1123SubdomainMaxLength (IsDNS1123Subdomain).
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
# validation.go: qualifiedNameFmt, qualifiedNameMaxLength (IsQualifiedName), labelValueFmt,
# LabelValueMaxLength (IsValidLabelValue).
_QUALIFIED_NAME_FMT = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
# validation.go: envVarNameFmt (IsEnvVarName).
_ENV_VAR_NAME_FMT = r"[-._a-zA-Z][-._a-zA-Z0-9]*"
# core/validation: validateTaintEffect (a toleration may also leave it empty: all effects; the
# config syntax always names one).
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# quantity.go: the grammar of resource.ParseQuantity. Suffixes: binarySI Ki..Ei, decimalSI
# n u m "" k M G T P E, or a decimal exponent e/E with a signed integer (`interpret` parses it
# with strconv.ParseInt).
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY_SI = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY_MAX_LENGTH = 64
_QUANTITY_MAX_EXPONENT = 30
_QUANTITY_MAX = Decimal(2**63 - 1)
"""resource.Quantity holds more, but int64 is where its Value() ends; no size here needs more."""


def _fullmatch(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def _regex_error(what: str, fmt: str, *examples: str) -> str:
    shown = ", ".join(repr(example) for example in examples)
    return f"must be {what} (e.g. {shown}; regex used for validation is '{fmt}')"


def _length_and_format(
    value: str, max_length: int, fmt: str, what: str, *examples: str
) -> list[str]:
    """The two problems validation.go reports for most names: too long, and not its regex."""
    problems = []
    if len(value) > max_length:
        problems.append(f"must be no more than {max_length} characters")
    if not _fullmatch(fmt, value):
        problems.append(_regex_error(what, fmt, *examples))
    return problems


def is_dns1123_label(value: str) -> list[str]:
    """validation.go IsDNS1123Label: namespaces, a Service's or a container's name."""
    return _length_and_format(
        value,
        DNS1123_LABEL_MAX_LENGTH,
        _DNS1123_LABEL_FMT,
        "a lowercase RFC 1123 label: lowercase alphanumerics or '-', starting and ending with an "
        "alphanumeric",
        "my-name",
        "123-abc",
    )


def is_system_namespace(name: str) -> bool:
    """True for a namespace the cluster owns (`default`, `kube-system`, any `kube-*`)."""
    return name in SYSTEM_NAMESPACES or name.startswith("kube-")


def is_dns1123_subdomain(value: str) -> list[str]:
    """validation.go IsDNS1123Subdomain: storage class names, label key prefixes."""
    return _length_and_format(
        value,
        DNS1123_SUBDOMAIN_MAX_LENGTH,
        _DNS1123_SUBDOMAIN_FMT,
        "a lowercase RFC 1123 subdomain: lowercase alphanumerics, '-' or '.', starting and ending "
        "with an alphanumeric",
        "example.com",
    )


def is_qualified_name(value: str) -> list[str]:
    """validation.go IsQualifiedName: label keys (node selector keys, toleration keys), an
    optional DNS subdomain prefix and '/', then a name of at most 63 characters."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            _regex_error(
                "a qualified name with an optional DNS subdomain prefix and '/'",
                _QUALIFIED_NAME_FMT,
                "MyName",
                "example.com/MyName",
            )
        ]
    problems = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {problem}" for problem in is_dns1123_subdomain(prefix)]
    if not name:
        return [*problems, "name part must be non-empty"]
    what = "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
    found = _length_and_format(
        name, QUALIFIED_NAME_MAX_LENGTH, _QUALIFIED_NAME_FMT, what, "MyName", "my.name"
    )
    return problems + [f"name part {problem}" for problem in found]


def is_valid_label_value(value: str) -> list[str]:
    """validation.go IsValidLabelValue: empty, or a qualified name's name part."""
    if not value:
        return []
    what = "empty or alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
    return _length_and_format(
        value, LABEL_VALUE_MAX_LENGTH, _QUALIFIED_NAME_FMT, what, "MyValue", "my_value"
    )


def is_env_var_name(value: str) -> list[str]:
    """validation.go IsEnvVarName: the regex, then hasChDirPrefix ('.', '..', '..' prefix)."""
    problems = []
    if not _fullmatch(_ENV_VAR_NAME_FMT, value):
        problems.append(
            _regex_error(
                "alphabetic characters, digits, '_', '-' or '.', not starting with a digit",
                _ENV_VAR_NAME_FMT,
                "MY_ENV.NAME",
            )
        )
    if value in (".", "..") or value.startswith(".."):
        problems.append("must not be '.' or '..' or start with '..'")
    return problems


def parse_quantity(value: str) -> Decimal:
    """resource.ParseQuantity's value of `value`; ValueError when it is no quantity."""
    match = _QUANTITY.fullmatch(value) if len(value) <= _QUANTITY_MAX_LENGTH else None
    if match is None:
        raise ValueError(
            "must be a Kubernetes quantity: a number with an optional suffix Ki, Mi, Gi, Ti, "
            "Pi, Ei, m, k, M, G, T, P, E or an exponent (e.g. '200Gi', '16', '500m')"
        )
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SI:
        scale, exponent = Decimal(1024) ** _BINARY_SI[suffix], 0
    elif suffix in _DECIMAL_SI:
        scale, exponent = Decimal(1), _DECIMAL_SI[suffix]
    else:
        scale, exponent = Decimal(1), int(suffix[1:])
    if abs(exponent) > _QUANTITY_MAX_EXPONENT:
        raise ValueError(f"must have an exponent of at most {_QUANTITY_MAX_EXPONENT}")
    try:
        number = Decimal(match["sign"] + match["number"])
    except InvalidOperation as error:  # pragma: no cover - the regex admits only decimals
        raise ValueError("must be a Kubernetes quantity") from error
    return number.scaleb(exponent) * scale


def is_positive_quantity(value: str) -> list[str]:
    """A quantity above zero: core/validation ValidateResourceQuantityValue (non-negative) and
    the PVC's "must be greater than zero" storage request; a zero size or memory makes no pod."""
    try:
        amount = parse_quantity(value)
    except ValueError as error:
        return [str(error)]
    if amount <= 0:
        return ["must be greater than zero"]
    if amount > _QUANTITY_MAX:
        return [f"must be at most {_QUANTITY_MAX} (int64) in base units"]
    return []


def node_selector_problems(item: str) -> list[str]:
    """A `key=value` node selector entry: core/validation ValidatePodSpec checks nodeSelector with
    ValidateLabels, key IsQualifiedName and value IsValidLabelValue."""
    return label_problems(item, "nvidia.com/gpu.product=NVIDIA-H200")


def label_problems(item: str, example: str = "release=prometheus") -> list[str]:
    """A `key=value` label, as ValidateLabels checks one: key IsQualifiedName, value
    IsValidLabelValue."""
    key, equals, value = item.partition("=")
    if not equals:
        return [f"must be key=value (e.g. {example})"]
    problems = [f"key {problem}" for problem in is_qualified_name(key)]
    return problems + [f"value {problem}" for problem in is_valid_label_value(value)]


def toleration_problems(item: str) -> list[str]:
    """A `key:Effect` (operator Exists) or `key=value:Effect` (operator Equal) toleration, as
    core/validation ValidateTolerations checks it: a non-empty key IsQualifiedName (ValidateLabelName);
    an empty key only with Exists (`:Effect` tolerates every taint of that effect); an Equal value
    IsValidLabelValue; the effect one of the taint effects (validateTaintEffect)."""
    shape = f"must be key:Effect or key=value:Effect with Effect one of {', '.join(TAINT_EFFECTS)}"
    if item.count(":") != 1:
        return [f"{shape}, with exactly one ':'"]
    key_value, _, effect = item.partition(":")
    key, equals, value = key_value.partition("=")
    problems = [] if effect in TAINT_EFFECTS else [shape]
    if key:
        problems += [f"key {problem}" for problem in is_qualified_name(key)]
    elif equals:
        problems.append("key must be non-empty with a value (operator Equal needs a key)")
    if equals:
        problems += [f"value {problem}" for problem in is_valid_label_value(value)]
    return problems


def is_path_segment_name(value: str) -> list[str]:
    """apimachinery content.IsPathSegmentName (path.ValidatePathSegmentName): not '.' or '..',
    no '/' or '%'."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{part}'" for part in ("/", "%") if part in value]


def image_problems(value: str) -> list[str]:
    """A container image: core/validation validateContainers requires a non-empty image without
    surrounding whitespace; no registry accepts a reference with whitespace or control characters
    inside either, and the runtime refuses what its reference grammar does not parse
    (`components.image_reference`), failing the pod with InvalidImageName."""
    if not value:
        return ["must be non-empty (a pinned image reference, e.g. registry/name:tag)"]
    if has_whitespace_or_control(value):
        return ["must contain no whitespace or control characters"]
    return reference_problems(value)


def registry_server_problems(value: str) -> list[str]:
    """A registry mirror's server: the pull secret's key and the first part of every reference
    pulled through it (`components.image_reference.registry_host_problems`)."""
    if has_whitespace_or_control(value):
        return ["must contain no whitespace or control characters"]
    return registry_host_problems(value)


def has_whitespace_or_control(value: str) -> bool:
    return any(character.isspace() or not character.isprintable() for character in value)


# validation.go: wildcardDNS1123SubdomainFmt (IsWildcardDNS1123Subdomain).
_WILDCARD_DNS1123_SUBDOMAIN_FMT = rf"\*\.{_DNS1123_SUBDOMAIN_FMT}"


def host_problems(value: str) -> list[str]:
    """An Ingress rule's host, as networking/validation validateIngressRules checks it: no IP
    address, a DNS subdomain, or one wildcard label first (`*.example.com`). A Gateway API
    HTTPRoute hostname has the same shape (its CRD's pattern, and "IPs are not allowed")."""
    if _is_ip_address(value):
        return ["must be a DNS name, not an IP address"]
    if "*" in value:
        return _length_and_format(
            value,
            DNS1123_SUBDOMAIN_MAX_LENGTH,
            _WILDCARD_DNS1123_SUBDOMAIN_FMT,
            "a wildcard DNS-1123 subdomain: '*.' followed by a valid DNS subdomain",
            "*.example.com",
        )
    return is_dns1123_subdomain(value)


def cidr_problems(value: str) -> list[str]:
    """A Service's loadBalancerSourceRanges item: core/validation parses each as a CIDR; the
    strict parsing of new objects (KEP-4858) refuses leading zeros and bits set past the prefix."""
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return [
            "must be a CIDR with no bits set past its prefix (e.g. '10.0.0.0/8', '2001:db8::/32')"
        ]
    if "/" not in value:
        return ["must be a CIDR: an address and a prefix length (e.g. '203.0.113.0/24')"]
    return []


def annotation_problems(item: str) -> list[str]:
    """A `key=value` annotation, as ValidateAnnotations checks one: the key IsQualifiedName (the
    value is free text)."""
    key, equals, _ = item.partition("=")
    if not equals:
        return ["must be key=value (e.g. service.beta.kubernetes.io/aws-load-balancer-type=nlb)"]
    return [f"key {problem}" for problem in is_qualified_name(key.lower())]


def _is_ip_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


# validation.go: percentFmt (IsValidPercent), what an IntOrString given as text must be.
_PERCENT_FMT = r"[0-9]+%"
# validation.go: configMapKeyFmt, the format of a Secret's and a ConfigMap's keys (IsConfigMapKey).
_CONFIG_MAP_KEY_FMT = r"[-._a-zA-Z0-9]+"


def int_or_percent_problems(value: str) -> list[str]:
    """A PodDisruptionBudget's `maxUnavailable` written as text: a whole number (sent as an int)
    or a percentage. policy/validation ValidatePodDisruptionBudgetSpec checks it with
    ValidatePositiveIntOrPercent (an int >= 0, or IsValidPercent) and IsNotMoreThan100Percent;
    the int is an int32."""
    if value.isascii() and value.isdigit():
        return [] if int(value) <= INT32_MAX else [f"must be at most {INT32_MAX} (int32)"]
    if not _fullmatch(_PERCENT_FMT, value):
        return ["must be a whole number (e.g. 1) or a percentage (e.g. 25%)"]
    if int(value[:-1]) > 100:
        return ["must not be greater than 100%"]
    return []


def is_config_map_key(value: str) -> list[str]:
    """A key inside a Secret (secretKeyRef.key): core/validation validateSecretKeySelector checks
    it with IsConfigMapKey: at most 253 of [-._a-zA-Z0-9], not `.`, `..` or `..`-prefixed."""
    problems = _length_and_format(
        value,
        DNS1123_SUBDOMAIN_MAX_LENGTH,
        _CONFIG_MAP_KEY_FMT,
        "a valid config key",
        "NGC_API_KEY",
    )
    if value in (".", ".."):
        problems.append(f"must not be '{value}'")
    elif value.startswith(".."):
        problems.append("must not start with '..'")
    return problems
