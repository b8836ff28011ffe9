"""mad-eval: multi-agent debate evaluation harness."""

__version__ = "0.1.0"
