"""The audit's recording, inside each replica: bit-exact digests of the first training steps."""
