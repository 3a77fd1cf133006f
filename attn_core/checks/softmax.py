"""Exercise checks for the course notebook on softmax."""

__all__ = []
