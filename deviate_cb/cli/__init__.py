"""The command line: ``deviate`` with its subcommands, and ``deviate-replicate``."""
