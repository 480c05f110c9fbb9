"""Helpers shared by the test suites (tests/, integrations/): imported as ``tests.helpers.<module>``."""
