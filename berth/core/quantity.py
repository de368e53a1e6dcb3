"""Kubernetes resource quantities, parsed into exact integers and printed for people.

Every amount in the core is an ``int`` in the resource's base unit: millicores for CPU,
bytes for memory and storage, plain counts for pods and extended resources. Integers keep
fit checks exact: a pod that needs exactly what is free fits.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}

CPU = "cpu"
MEMORY = "memory"
DISK = "ephemeral-storage"
PODS = "pods"

_BYTE_RESOURCES = (MEMORY, DISK)


class QuantityError(ValueError):
    """A quantity string that Kubernetes would not accept."""


def parse_quantity(text: str | int | float) -> Decimal:
    """Parse ``"1.5Gi"``, ``"250m"``, ``"2"``, ``"1e3"`` into an exact Decimal."""
    if isinstance(text, bool):
        raise QuantityError(f"not a quantity: {text!r}")
    if isinstance(text, int | float):
        return Decimal(str(text))
    s = str(text).strip()
    if not s:
        raise QuantityError("empty quantity")
    for suffix, factor in _BINARY.items():
        if s.endswith(suffix):
            return _number(s[: -len(suffix)], text) * factor
    if len(s) > 1 and s[-1] in "numkMGTPE":
        return _number(s[:-1], text) * _DECIMAL[s[-1]]
    return _number(s, text)


def _number(s: str, original: object) -> Decimal:
    try:
        value = Decimal(s)
    except InvalidOperation:
        raise QuantityError(f"not a quantity: {original!r}") from None
    if not value.is_finite():
        raise QuantityError(f"not a quantity: {original!r}")
    return value


@lru_cache(maxsize=4096)
def to_base_units(resource: str, text: str | int | float) -> int:
    """A quantity in the resource's base unit, rounded up as the scheduler rounds requests.
    Memoised: a cluster repeats a handful of quantity strings across thousands of pods."""
    value = parse_quantity(text)
    if resource == CPU:
        value = value * 1000
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def format_amount(resource: str, amount: int) -> str:
    """Print an amount the way the refusal messages of seed 001 do (``2.0 GiB``, ``500m``)."""
    if resource == CPU:
        if amount % 1000 == 0:
            return str(amount // 1000)
        return f"{amount}m"
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        return format_bytes(amount)
    return str(amount)


def format_bytes(amount: int) -> str:
    sign = "-" if amount < 0 else ""
    n = abs(amount)
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= factor:
            return sign + _scaled(n, factor, unit)
    return f"{sign}{n} B"


def _scaled(n: int, factor: int, unit: str) -> str:
    """One decimal like the seed ("1.0 GiB"); two when one would round a real difference away."""
    digits = 1 if (n * 10) % factor == 0 else 2
    return f"{n / factor:.{digits}f} {unit}"
