"""Measurement scripts for the developers of MemoryOS (not shipped): `python -m tools.<name>`."""
