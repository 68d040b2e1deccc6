"""The `memoryos` subcommands, one module each."""
