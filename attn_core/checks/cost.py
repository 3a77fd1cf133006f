"""Exercise checks for the course notebook on cost."""

__all__ = []
