"""Development tools of the repository (not part of the service package): ``python -m tools.docs``."""
