"""Exercise checks for the course notebook on weighted sum."""

__all__ = []
