"""berth: a placement engine for Kubernetes."""

__version__ = "0.1.0"
