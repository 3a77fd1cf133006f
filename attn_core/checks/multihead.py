"""Exercise checks for the course notebook on multihead."""

__all__ = []
