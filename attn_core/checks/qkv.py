"""Exercise checks for the course notebook on qkv."""

__all__ = []
