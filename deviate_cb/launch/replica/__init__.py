"""What runs in a replica's own Python processes: bootstrap, injection, isolation, final metrics."""
