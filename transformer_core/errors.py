"""Errors that are the user's to fix (bad config, missing file), not bugs.

The command line prints these as one clear message and exits with status 2,
instead of a traceback; everything else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """A mistake in the user's input: the message says what and where."""


class ConfigError(UserError, ValueError):
    """An invalid configuration value; the message names the field or key."""
