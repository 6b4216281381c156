"""Webhooks: signed notifications of an API key's tables, sent to its backend.

* :mod:`~service.webhooks.registry`: the registrations (an API key's webhooks, their sealed secrets,
  their changes, their delivery status, deliveries log and dead letters), kept in Redis in the key's slot;
* :mod:`~service.webhooks.outbox`: how a notification travels, from the table's outbox (a Redis stream
  the write's own Lua script adds to) to a webhook's lane;
* :mod:`~service.webhooks.dispatcher`: the dispatcher that visits the due tables and delivers their
  outboxes' entries, lane by lane;
* :mod:`~service.webhooks.delivery`: one signed delivery over HTTP (the target check, the connection,
  the deadline);
* :mod:`~service.webhooks.metrics`: the webhooks' figures in ``/metrics``.

The store (:mod:`service.store`) writes the outboxes and never sends anything: every outbound request
of the service is made here.  The HTTP views of ``/v1/webhooks`` are :mod:`service.api.webhooks`.
"""
