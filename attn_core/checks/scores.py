"""Exercise checks for the course notebook on scores."""

__all__ = []
