"""Evaluations of the memory pipeline (``memoryos eval``)."""
