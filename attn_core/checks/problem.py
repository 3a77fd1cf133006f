"""Exercise checks for the course notebook on problem."""

__all__ = []
