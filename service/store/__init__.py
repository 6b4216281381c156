"""Storage back ends for the service (Redis access and an embedded Redis server)."""
