"""Toy data (placeholder: filled in by the section that owns it)."""

__all__: list[str] = []
