"""Exercise checks for the course notebook on masking."""

__all__ = []
