"""The hardware/software fingerprint of a run: what decides implementation-level results."""
