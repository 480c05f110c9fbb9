"""The capture core: what the framework adapters drive while a run trains, with no framework of its own."""
