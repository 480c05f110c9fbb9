"""A trainer module that raises while it is imported (a bad --trainer, exit status 2)."""

raise RuntimeError("boom at import")


def main():  # never reached
    return {}
