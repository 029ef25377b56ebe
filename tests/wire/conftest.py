"""Every wire test may draw kio's types (``kio_strategies`` registers what they need)."""

from . import kio_strategies  # noqa: F401 (registers strategies)
