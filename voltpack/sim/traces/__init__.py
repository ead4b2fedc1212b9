"""Loaders for public cluster traces."""
