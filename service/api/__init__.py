"""The HTTP layer (floor 3): Flask app, schemas, problem+json errors, views."""

from .app import create_app

__all__ = ["create_app"]
