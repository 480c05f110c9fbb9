"""The run directory and its files: the contract between capture, launch and analysis, one module per file."""
