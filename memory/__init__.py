"""The MemoryOS algorithm as pure functions and small state classes.

Nothing here does I/O, awaits, or reads a clock: agents and the service pass times in as
floats (seconds since the epoch) and do the Kafka, Qdrant and LLM work around these calls.
"""
