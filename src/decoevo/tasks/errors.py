"""Input errors that name the file, the line and the field (defined in `decoevo.errors`)."""

from ..errors import DatasetError

__all__ = ["DatasetError"]
