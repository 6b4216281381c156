"""The HTTP layer (floor 3): Flask app, schemas, problem+json errors, views.

``from service.api import create_app`` is :func:`service.api.app.create_app`, imported when it is asked for:
importing one module of the layer (``service.api.rate_limits`` from the companion app's views) does not build
the whole of it.
"""

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
