"""Errors a user can fix. Every user-facing command turns a `UserError` into one line and exit 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input, configuration or state, with a message that names the file, flag or field to fix."""


class ConfigError(UserError, ValueError):
    """Bad configuration (a flag, a config key, a data file)."""
