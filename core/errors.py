"""Exceptions of the core. An infeasible pod is a verdict, never an exception:
these are for malformed input only."""


class CoreError(Exception):
    """Base of every error the core raises."""


class InvalidInput(CoreError):
    """An input value the core cannot interpret (names the field and the value)."""
