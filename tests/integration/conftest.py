"""Whole-stack tests: a real broker, store and HTTP server together, started by each test."""
