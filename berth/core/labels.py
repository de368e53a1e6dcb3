"""Label keys and values as Kubernetes validates them (apimachinery's ``IsQualifiedName`` and
``IsValidLabelValue``): a key is an optional DNS-subdomain prefix (at most 253 characters) and
``/``, then a name of 1 to 63 characters, alphanumerics with ``-``, ``_`` and ``.`` inside; a value
is empty or such a name. A selector that names anything else could never match a real label."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema

NAME_MAX = 63
PREFIX_MAX = 253
_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
_NAME_RE = re.compile(_NAME)
_SUBDOMAIN_RE = re.compile(_SUBDOMAIN)

_NAME_RULE = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
              "alphanumeric character")

KEY_PATTERN = rf"^({_SUBDOMAIN}/)?([A-Za-z0-9][-A-Za-z0-9_.]{{0,61}})?[A-Za-z0-9]$"
VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if "/" in prefix:
            return f"label key {key!r}: a qualified name has at most one '/'"
        if not prefix:
            return f"label key {key!r}: the prefix before '/' must be non-empty"
        if len(prefix) > PREFIX_MAX:
            return f"label key {key[:40]!r}...: the prefix must be no more than {PREFIX_MAX} characters"
        if not _SUBDOMAIN_RE.fullmatch(prefix):
            return (f"label key {key!r}: the prefix must be a lowercase DNS subdomain (lower case alphanumerics, "
                    "'-' and '.', starting and ending with an alphanumeric character)")
    if not name:
        return f"label key {key!r}: the name part must be non-empty"
    if len(name) > NAME_MAX:
        return f"label key {key[:40]!r}...: the name part must be no more than {NAME_MAX} characters"
    if not _NAME_RE.fullmatch(name):
        return f"label key {key!r}: the name part {_NAME_RULE}"
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None (an empty value is valid)."""
    if len(value) > NAME_MAX:
        return f"label value {value[:40]!r}... has {len(value)} characters; at most {NAME_MAX}"
    if value and not _NAME_RE.fullmatch(value):
        return f"label value {value!r} {_NAME_RULE}"
    return None


def _key(key: str) -> str:
    problem = label_key_problem(key)
    if problem:
        raise ValueError(problem)
    return key


def _value(value: str) -> str:
    problem = label_value_problem(value)
    if problem:
        raise ValueError(problem)
    return value


LabelKey = Annotated[str, AfterValidator(_key)]
"""A label key, validated as Kubernetes validates it (a map's key: the CRD cannot describe those)."""

LabelKeyField = Annotated[str, AfterValidator(_key),
                          WithJsonSchema({"type": "string", "minLength": 1, "maxLength": PREFIX_MAX + 1 + NAME_MAX,
                                          "pattern": KEY_PATTERN})]
"""A label key as a field of its own, described so in the CRD's schema too."""

LabelValue = Annotated[str, AfterValidator(_value),
                       WithJsonSchema({"type": "string", "maxLength": NAME_MAX, "pattern": VALUE_PATTERN})]
"""A label value, validated as Kubernetes validates it (and described so in the CRD's schema)."""


_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = 2**63


def go_int(text: str) -> int | None:
    """A base-10 int64 as Go's strconv.ParseInt reads it (no spaces, no underscores), else None:
    the values of node affinity's Gt and Lt, and the node labels they are compared with."""
    if _GO_INT.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -_INT64 <= value < _INT64 else None
