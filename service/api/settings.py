"""The app's settings, typed (:class:`service.config.Settings`): what :func:`service.api.app.create_app`
made of the environment and its ``config``, the one place the HTTP layer reads a setting from."""

from __future__ import annotations

from flask import Flask, current_app

from ..config import Settings

KEY = "settings"
"""``app.extensions`` key of the app's :class:`~service.config.Settings`."""


def current(app: Flask | None = None) -> Settings:
    """The settings of ``app`` (default: the app of the request or context at hand)."""
    return (app or current_app).extensions[KEY]
