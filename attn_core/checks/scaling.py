"""Exercise checks for the course notebook on scaling."""

__all__ = []
