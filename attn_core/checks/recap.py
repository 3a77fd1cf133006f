"""Exercise checks for the course notebook on recap."""

__all__ = []
