"""Test helpers shared across suites (fake servers, fixtures)."""
