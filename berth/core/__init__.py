"""The placement core: plain typed data in, decisions out.

Nothing in this package performs I/O, reads a clock or draws random numbers: the
extender, the operator and the CLI hand it everything it needs. One place decides
placement, so every shell calls :mod:`berth.core.evaluate` and :mod:`berth.core.plan`.
"""
