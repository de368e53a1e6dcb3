"""Kubernetes resource quantities, parsed into exact integers and printed for people.

Every amount in the core is an ``int`` in the resource's base unit: millicores for CPU,
bytes for memory and storage, plain counts for pods and extended resources. Integers keep
fit checks exact: a pod that needs exactly what is free fits.

The grammar is the API server's (``resource.ParseQuantity``)::

    <quantity> ::= <sign>? <number> <suffix>
    <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>      (ASCII digits only)
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei                                (binary)
                 | n | u | m | "" | k | M | G | T | P | E                     (decimal)
                 | e<sign>?<digits> | E<sign>?<digits>                       (decimal exponent)

with surrounding whitespace ignored, as the API server's JSON decoding ignores it. Amounts are
bounded as kube-scheduler bounds them: it counts requests and allocatable in 64-bit integers
(``MilliValue`` for CPU, ``Value`` otherwise), so an amount beyond 2^63-1 base units is refused,
and a binary-suffixed one is first capped at 2^63-1 units as the API server caps it. Negative
amounts are refused: the API server refuses them in requests and allocatable alike. The bounds
are checked on the lengths of the digit strings, before any integer is built, so that parsing
costs time in proportion to the text whatever its exponent (``1e999999999`` is refused at once).
"""

from __future__ import annotations

import re
from functools import lru_cache

CPU = "cpu"
MEMORY = "memory"
DISK = "ephemeral-storage"
PODS = "pods"

_BYTE_RESOURCES = (MEMORY, DISK)

MAX_AMOUNT = 2**63 - 1
"""The largest amount kube-scheduler can count (int64), in the resource's base unit."""

_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# The API server's scanner (parseQuantityString): sign, digits, an optional fraction, then the
# suffix's letters, an optional sign and digits. [0-9] is ASCII only (no other script's digits).
_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+")

_FRACTION_DIGITS = 80
"""Fraction digits kept below the base unit; more only ever round up (see :func:`_ceil_amount`)."""


class QuantityError(ValueError):
    """A quantity string that Kubernetes would not accept, or an amount kube-scheduler cannot count."""


def to_base_units(resource: str, text: str | int | float) -> int:
    """A quantity in the resource's base unit, rounded up as the scheduler rounds requests."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(f"not a quantity: {_shown(text)}")
    return _base_units(resource, text)


@lru_cache(maxsize=4096)
def _base_units(resource: str, text: str | int | float) -> int:
    """Memoised (least recently used dropped): a cluster repeats a handful of quantity strings
    across thousands of pods."""
    sign, digits, fraction, base, exponent = _scan(text)
    if sign == "-" and (digits + fraction).strip("0"):
        raise QuantityError(f"{_shown(text)} is negative; amounts must not be")
    scale = 3 if resource == CPU else 0  # millicores
    amount = _ceil_amount(digits, fraction, exponent + scale if base == 10 else scale,
                          exponent if base == 2 else 0, capped=base == 2, scale=scale)
    if amount > MAX_AMOUNT:
        unit = "millicores" if resource == CPU else "units"
        raise QuantityError(f"{_shown(text)} is too large: more than 2^63-1 {unit}, the most kube-scheduler "
                            "can count")
    return amount


def _shown(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:37] + "...'"


def _scan(text: str | int | float) -> tuple[str, str, str, int, int]:
    """(sign, integer digits, fraction digits, base 10 or 2, exponent) of a quantity."""
    s = (text if isinstance(text, str) else repr(text)).strip()
    if not s:
        raise QuantityError("empty quantity")
    found = _QUANTITY.fullmatch(s)
    if found is None:
        raise QuantityError(f"not a quantity: {_shown(text)} (expected a number and a suffix such as 500m, "
                            "1.5Gi or 1e3)")
    sign, digits, fraction, suffix = found.group(1), found.group(2), found.group(3) or "", found.group(4)
    if not digits and not fraction:
        raise QuantityError(f"not a quantity: {_shown(text)} (no digits)")
    if suffix in _BINARY_EXPONENTS:
        return sign, digits, fraction, 2, _BINARY_EXPONENTS[suffix]
    if suffix in _DECIMAL_EXPONENTS:
        return sign, digits, fraction, 10, _DECIMAL_EXPONENTS[suffix]
    if _EXPONENT.fullmatch(suffix):
        exponent = suffix[1:].lstrip("+")
        negative = exponent.startswith("-")
        magnitude = exponent.lstrip("-").lstrip("0")
        if len(magnitude) > 18:  # beyond int64, which the API server refuses too
            raise QuantityError(f"not a quantity: {_shown(text)} (exponent out of range)")
        return sign, digits, fraction, 10, -int(magnitude or "0") if negative else int(magnitude or "0")
    raise QuantityError(f"not a quantity: {_shown(text)} (unknown suffix {suffix!r}; use one of n, u, m, k, M, "
                        "G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3)")


def _ceil_amount(digits: str, fraction: str, exponent10: int, exponent2: int, *, capped: bool,
                 scale: int) -> int:
    """ceil(<digits>.<fraction> x 10^exponent10 x 2^exponent2), the integers bounded first: a value
    whose digits put it beyond 2^63-1 is refused (or, ``capped``, held at 2^63-1 units, then
    scaled by 10^``scale``) from the lengths alone, and a long fraction is cut at
    :data:`_FRACTION_DIGITS` digits, a non-zero remainder rounding up."""
    mantissa = (digits + fraction).lstrip("0")
    if not mantissa:
        return 0
    shift = exponent10 - len(fraction)  # value = int(mantissa) x 10^shift x 2^exponent2
    magnitude = len(mantissa) + shift  # 10^(magnitude-1) <= value / 2^exponent2 < 10^magnitude
    if magnitude > 20:  # at least 10^20 > 2^63-1
        cap_scaled: int = MAX_AMOUNT * 10**scale
        return cap_scaled if capped else MAX_AMOUNT + 1
    if magnitude + 19 <= 0:  # below 10^-19 x 2^60 < 1: rounds up to one base unit
        return 1
    value: int
    if shift >= 0:
        value = int(mantissa) * 10**shift << exponent2
    else:
        kept, rest = mantissa[:len(mantissa) - max(0, -shift - _FRACTION_DIGITS)], ""
        if len(kept) < len(mantissa):
            rest = mantissa[len(kept):]
            shift = -_FRACTION_DIGITS
        # With 80 >= 60 fraction digits kept, no integer lies strictly between the kept value x 2^k
        # and the whole one, so the cut remainder decides only when the kept part is exact.
        whole, remainder = divmod(int(kept) << exponent2, 10**-shift)
        value = whole + (1 if remainder or rest.strip("0") else 0)
    if capped and scale:
        cap: int = MAX_AMOUNT * 10**scale
        return min(value, cap)
    return min(value, MAX_AMOUNT) if capped else value


def format_amount(resource: str, amount: int) -> str:
    """Print an amount the way the refusal messages do (``2.0 GiB``, ``500m``; docs/behaviour.md#fit-message)."""
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
    """One decimal ("1.0 GiB"); two when one would round a real difference away."""
    digits = 1 if (n * 10) % factor == 0 else 2
    return f"{n / factor:.{digits}f} {unit}"
