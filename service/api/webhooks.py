"""`/v1/webhooks`: an API key's webhooks (thin views over :mod:`service.webhooks.registry`).

Every operation needs ``X-API-Key`` and sees the key's own webhooks only
(another key's id is a 404, as an unknown one); without ``API_KEYS`` (or with
``WEBHOOKS`` off) there is no owner and every operation is a 404.  A webhook
gets the notifications of the tables its key created (its ``tables`` may narrow
that to some of them), signed as Standard Webhooks (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``) with the ``secret`` shown only in
the creation's answer.  How deliveries are made, retried and dead-lettered:
:mod:`service.webhooks` and docs/api.md.

Readings (where the contract is silent):

* ``tables`` is null for every table of the key (in a registration: null or
  absent); a list names at most 100 of the key's tables (one that is not, or
  no longer, the key's: 422 with ``errors`` naming it).  A repeated event type
  or table is kept once.
* ``status`` is ``failing`` once a notification was dead-lettered and until a
  delivery succeeds again; ``last_delivery`` is the last attempt (a test's
  included), ``dead_letters`` how many were dead-lettered.
* ``POST …/test`` sends a ``webhook.test`` message (its ``data`` members all
  null) now, one attempt within ``WEBHOOK_TIMEOUT``, and answers the webhook
  with that attempt as its ``last_delivery`` (200 whatever the receiver said;
  its ``status`` is not changed by a test).  Tests are not in the deliveries log.
* An API key has at most 20 webhooks (409 ``too_many_webhooks``).
* ``PATCH`` takes any of ``url``, ``events``, ``tables``, ``enabled`` (at least
  one), checked as in a registration; what a change does to the notifications
  not sent yet (an added type or table is sent from the change on; disabled,
  nothing; re-enabled, what is written from then on) is
  :mod:`service.webhooks.registry`'s module doc.  ``tables: null`` widens the
  webhook to every table of the key.
* The deliveries log lists the newest first, 20 a page by default (at most 100),
  with ``next`` to pass as ``after``; it keeps the newest 500 deliveries of a
  webhook.  A redelivery sends a logged delivery again now (one attempt, the same
  ``webhook-id``) and answers it as listed after that attempt (200 whatever the
  receiver said); the log keeps each delivery's notification, so a delivery is
  redelivered as long as it is listed, however long ago its outbox dropped it.
  Like a test, it is sent whether the webhook is enabled or not (it is asked for).
* ``POST …/secret/rotate`` answers the webhook with its new ``secret`` (shown
  only there) and ``previous_secret_expires``: until then the secret it replaced
  signs every delivery too (two ``v1,`` signatures).
* The endpoints' rate limits (per API key): ``CLIENT_WEBHOOK_CALLS_PER_MINUTE``
  for every request, and ``CLIENT_WEBHOOK_SENDS_PER_MINUTE`` for those that send
  a request out (a test, a redelivery).
"""

from __future__ import annotations

import re

import marshmallow as ma
from flask import current_app, jsonify
from marshmallow import fields, validate, validates_schema

from ..webhooks.delivery import MAX_URL_CHARS, TargetRefused
from ..webhooks.registry import (
    EVENTS,
    KEEP,
    MAX_TABLES,
    Busy,
    DeliveryNotFound,
    NotTheOwnersTable,
    Registry,
    TooManyWebhooks,
)
from . import rate_limits, settings
from .callers import api_key
from .problems import ApiProblem, InvalidInput, WithoutApiKeys
from .smorest import Blueprint
from .table_views import StoreNotConfigured

blp = Blueprint("webhooks", __name__, url_prefix="/v1/webhooks",
                description="Signed notifications of an API key's tables, sent to its backend.")

HOOK_ID = re.compile(r"wh_[0-9a-f]{16}")
DELIVERY_ID = re.compile(r"msg_[0-9a-f]{16}_[0-9]{1,20}-[0-9]{1,20}")
DELIVERIES_PAGE = 20
MAX_DELIVERIES_PAGE = 100
KEY_ONLY: list[dict[str, list[str]]] = [{"apiKey": []}]
_NO_KEY = (401, "no `X-API-Key`, or not a key of the service (`api_key_required`, `api_key_invalid`)")
_NO_HOOK = (404, "no such webhook of this API key (`webhook_not_found`), or the service runs without API keys "
                 "(`not_found`)")
_STORE_DOWN = (503, "the store (Redis) is unavailable (`store_unavailable`); retry after `Retry-After`")
_LIMITED = (429, "a rate limit (`too_many_requests`): see `Retry-After`")
_CALLS = "client_webhook_calls_per_minute"
_SENDS = "client_webhook_sends_per_minute"


# -- schemas -------------------------------------------------------------------------------------
class CreateWebhookRequest(ma.Schema):
    url = fields.String(required=True, validate=validate.Length(min=1, max=MAX_URL_CHARS), metadata={
        "description": "where to POST: an `http` or `https` URL whose host resolves to public addresses only"})
    events = fields.List(fields.String(validate=validate.OneOf(EVENTS)), required=True,
                         validate=validate.Length(min=1, max=len(EVENTS)), metadata={
                             "description": "the notification types to send"})
    tables = fields.List(fields.String(validate=[validate.Length(equal=16), validate.Regexp(r"^[0-9a-f]{16}$")]),
                         allow_none=True, validate=validate.Length(min=1, max=MAX_TABLES), metadata={
                             "description": "only these tables (each one the API key created); absent or null: "
                                            "every table of the key"})


class LastDelivery(ma.Schema):
    at = fields.String(required=True, metadata={"description": "when the attempt ended (UTC, ISO 8601)"})
    id = fields.String(required=True, metadata={"description": "its `webhook-id`"})
    type = fields.String(required=True)
    table = fields.String(required=True, allow_none=True)
    seq = fields.Integer(required=True, allow_none=True)
    attempt = fields.Integer(required=True, metadata={"description": "1 for the first attempt of a message"})
    ok = fields.Boolean(required=True, metadata={"description": "the receiver answered 2xx"})
    status = fields.Integer(required=True, allow_none=True, metadata={"description": "its HTTP status (null: none)"})
    error = fields.String(required=True, allow_none=True)
    duration_ms = fields.Integer(required=True)


class WebhookView(ma.Schema):
    id = fields.String(required=True)
    url = fields.String(required=True)
    events = fields.List(fields.String(validate=validate.OneOf(EVENTS)), required=True)
    tables = fields.List(fields.String(), required=True, allow_none=True,
                         metadata={"description": "the tables it is limited to; null: every table of the key"})
    enabled = fields.Boolean(required=True, metadata={"description": "false: nothing is sent to it (`PATCH`)"})
    created = fields.String(required=True, metadata={"description": "when it was registered (UTC, ISO 8601)"})
    status = fields.String(required=True, validate=validate.OneOf(("ok", "failing")), metadata={
        "description": "`failing` from a dead-lettered notification until a delivery succeeds"})
    last_delivery = fields.Nested(LastDelivery, required=True, allow_none=True)
    dead_letters = fields.Integer(required=True, metadata={
        "description": "notifications given up on after the retry budget (about a day)"})
    previous_secret_expires = fields.String(required=True, allow_none=True, metadata={
        "description": "until when the secret a rotation replaced signs too (UTC, ISO 8601); null: none does"})


class WebhookCreated(WebhookView):
    secret = fields.String(required=True, metadata={
        "description": "the signing secret (`whsec_…`, Standard Webhooks): shown only here"})


class WebhooksPage(ma.Schema):
    webhooks = fields.List(fields.Nested(WebhookView), required=True, metadata={"description": "oldest first"})


class UpdateWebhookRequest(ma.Schema):
    url = fields.String(validate=validate.Length(min=1, max=MAX_URL_CHARS), metadata={
        "description": "where to POST from now on (checked as in a registration); what the webhook was not given "
                       "yet goes there"})
    events = fields.List(fields.String(validate=validate.OneOf(EVENTS)),
                         validate=validate.Length(min=1, max=len(EVENTS)),
                         metadata={"description": "the notification types to send: one added is sent from now on"})
    tables = fields.List(fields.String(validate=[validate.Length(equal=16), validate.Regexp(r"^[0-9a-f]{16}$")]),
                         allow_none=True, validate=validate.Length(min=1, max=MAX_TABLES), metadata={
                             "description": "only these tables (each one the API key created); null: every table of "
                                            "the key. A table added is sent from now on"})
    enabled = fields.Boolean(metadata={
        "description": "false: nothing is sent to the webhook (what was waiting included); true again: what is "
                       "written from then on is sent, nothing written before"})

    @validates_schema
    def _names_something(self, data: dict, **_: object) -> None:
        if not data:
            raise ma.ValidationError("name at least one of `url`, `events`, `tables`, `enabled`")


class LastResponse(ma.Schema):
    at = fields.String(required=True, metadata={"description": "when the attempt ended (UTC, ISO 8601)"})
    status = fields.Integer(required=True, allow_none=True, metadata={"description": "its HTTP status (null: none)"})
    error = fields.String(required=True, allow_none=True, metadata={"description": "why it failed (null: a 2xx)"})
    duration_ms = fields.Integer(required=True)


class Delivery(ma.Schema):
    id = fields.String(required=True, metadata={"description": "the delivery's `webhook-id` (the same on every "
                                                                "attempt and redelivery)"})
    type = fields.String(required=True, validate=validate.OneOf(EVENTS))
    table = fields.String(required=True)
    seq = fields.Integer(required=True, allow_none=True)
    status = fields.String(required=True, validate=validate.OneOf(("delivered", "retrying", "dead")), metadata={
        "description": "`delivered` (a 2xx), `retrying` (it failed and is tried again) or `dead` (given up: its "
                       "retry budget ran out, or the webhook was disabled or changed so that it no longer takes it)"})
    attempts = fields.Integer(required=True, metadata={"description": "attempts so far, redeliveries included"})
    last_response = fields.Nested(LastResponse, required=True)
    created = fields.String(required=True, metadata={"description": "when the notification was written (UTC, ISO "
                                                                     "8601): its `timestamp`"})


class DeliveriesQuery(ma.Schema):
    after = fields.String(validate=validate.Regexp(r"^[0-9]{1,15}$"), metadata={
        "description": "the `next` of the previous page (opaque); absent: the newest"})
    cursor = fields.String(validate=validate.Regexp(r"^[0-9]{1,15}$"), metadata={
        "description": "the same as `after` (the name the other lists use)"})
    limit = fields.Integer(validate=validate.Range(1, MAX_DELIVERIES_PAGE), load_default=DELIVERIES_PAGE)


class DeliveriesPage(ma.Schema):
    deliveries = fields.List(fields.Nested(Delivery), required=True, metadata={"description": "newest first"})
    next = fields.String(required=True, allow_none=True,
                         metadata={"description": "pass as `after` for the next page; null at the end"})


# -- problems ------------------------------------------------------------------------------------
class WebhookNotFound(ApiProblem):
    status, code, title = 404, "webhook_not_found", "Webhook not found"


class WebhookUrlRefused(ApiProblem):
    status, code, title = 422, "webhook_url_refused", "Webhook URL refused"


class TooManyWebhooksProblem(ApiProblem):
    status, code, title = 409, "too_many_webhooks", "Too many webhooks"


class DeliveryNotFoundProblem(ApiProblem):
    status, code, title = 404, "delivery_not_found", "Delivery not found"


class WebhookBusy(ApiProblem):
    status, code, title = 503, "busy", "Busy"


def _registry() -> tuple[Registry, str]:
    owner = api_key()
    if owner is None or not settings.current().webhooks:
        raise WithoutApiKeys("webhooks belong to API keys: this service runs without API_KEYS (or WEBHOOKS "
                                  "is off)")
    found = current_app.extensions.get("webhooks")
    if found is None:
        raise StoreNotConfigured("no Redis is configured (set REDIS_URL)", headers={"Retry-After": "5"})
    return found, owner


def _hook_id(hook_id: str) -> str:
    if not HOOK_ID.fullmatch(hook_id):
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    return hook_id


# -- views ---------------------------------------------------------------------------------------
@blp.route("", methods=["POST"])
@blp.arguments(CreateWebhookRequest(), example={"url": "https://backend.example/mahjong",
                                                "events": ["event.recorded", "round.ended"]})
@blp.response(201, WebhookCreated, headers={"Location": {"schema": {"type": "string"}}})
@blp.problems(400, _NO_KEY, (404, "the service runs without API keys (`not_found`)"),
              (409, "the API key has 20 webhooks already (`too_many_webhooks`)"), 413, 415, _LIMITED,
              (422, "the body breaks the schema (`invalid_input`; a table that is not the key's is named in "
                    "`errors`), or the URL is not one the service sends to (`webhook_url_refused`: not http(s), "
                    "credentials in it, a host that does not resolve or resolves to a loopback, private or "
                    "link-local address)"), _STORE_DOWN)
@blp.doc(operationId="createWebhook", security=KEY_ONLY)
@rate_limits.limited(_CALLS)
def create_webhook(args):
    """Register a webhook: the key's backend gets a signed `POST` for each notification of the key's tables.

    Each delivery is `{"type", "timestamp", "data": {"table", "seq", "version", "record", "balances"}}` with
    the Standard Webhooks headers `webhook-id`, `webhook-timestamp` and `webhook-signature` (HMAC-SHA256 with
    the `secret`, shown only in this response). Delivered at least once, in seq order per table; retried
    with exponential backoff for about a day, then dead-lettered (the webhook turns `failing`).
    """
    registry, owner = _registry()
    try:
        view, secret = registry.create(owner, args["url"], args["events"], args.get("tables"))
    except TargetRefused as exc:
        raise WebhookUrlRefused(str(exc), errors={"url": [str(exc)]}) from None
    except NotTheOwnersTable as exc:
        raise InvalidInput("`tables` names tables that this API key did not create",
                           errors={f"tables.{i}": ["not a table of this API key"] for i in exc.indexes}) from None
    except TooManyWebhooks as exc:
        raise TooManyWebhooksProblem(str(exc)) from None
    response = jsonify({**view, "secret": secret})
    response.status_code = 201
    response.headers["Location"] = f"/v1/webhooks/{view['id']}"
    response.headers["Cache-Control"] = "no-store"
    return response


@blp.route("", methods=["GET"])
@blp.response(200, WebhooksPage)
@blp.problems(_NO_KEY, (404, "the service runs without API keys (`not_found`)"), _LIMITED, _STORE_DOWN)
@blp.doc(operationId="listWebhooks", security=KEY_ONLY)
@rate_limits.limited(_CALLS)
def list_webhooks():
    """The API key's webhooks, oldest first, each with its status and last delivery."""
    registry, owner = _registry()
    return jsonify({"webhooks": registry.all(owner)})


@blp.route("/<hook_id>", methods=["GET"])
@blp.response(200, WebhookView)
@blp.problems(_NO_KEY, _NO_HOOK, _LIMITED, _STORE_DOWN)
@blp.doc(operationId="getWebhook", security=KEY_ONLY)
@rate_limits.limited(_CALLS)
def get_webhook(hook_id):
    """One of the API key's webhooks, with its status (`ok`, `failing`) and its last delivery."""
    registry, owner = _registry()
    view = registry.get(owner, _hook_id(hook_id))
    if view is None:
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    return jsonify(view)


@blp.route("/<hook_id>", methods=["DELETE"])
@blp.response(204)
@blp.problems(_NO_KEY, _NO_HOOK, _LIMITED, _STORE_DOWN)
@blp.doc(operationId="deleteWebhook", security=KEY_ONLY)
@rate_limits.limited(_CALLS)
def delete_webhook(hook_id):
    """Delete one of the API key's webhooks: nothing more is sent to it (a delivery in flight may still land)."""
    registry, owner = _registry()
    if not registry.delete(owner, _hook_id(hook_id)):
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    response = current_app.response_class(status=204)
    del response.headers["Content-Type"]
    return response


@blp.route("/<hook_id>/test", methods=["POST"])
@blp.response(200, WebhookView)
@blp.problems(_NO_KEY, _NO_HOOK, _LIMITED, _STORE_DOWN)
@blp.doc(operationId="testWebhook", security=KEY_ONLY)
@rate_limits.limited(_CALLS, _SENDS)
def test_webhook(hook_id):
    """Send a signed `webhook.test` message to the webhook now (one attempt) and answer the webhook with
    that attempt as its `last_delivery`."""
    registry, owner = _registry()
    view = registry.test(owner, _hook_id(hook_id), float(settings.current().webhook_timeout))
    if view is None:
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    return jsonify(view)


@blp.route("/<hook_id>", methods=["PATCH"])
@blp.arguments(UpdateWebhookRequest(), example={"enabled": False})
@blp.response(200, WebhookView)
@blp.problems(400, _NO_KEY, _NO_HOOK, 413, 415, _LIMITED,
              (422, "the body breaks the schema or names nothing (`invalid_input`; a table that is not the key's is "
                    "named in `errors`), or the URL is not one the service sends to (`webhook_url_refused`)"),
              (503, "the store (Redis) is unavailable (`store_unavailable`), or the webhook kept changing meanwhile "
                    "(`busy`); retry after `Retry-After`"))
@blp.doc(operationId="updateWebhook", security=KEY_ONLY)
@rate_limits.limited(_CALLS)
def update_webhook(args, hook_id):
    """Change one of the API key's webhooks: any of its `url`, `events`, `tables` and `enabled`, checked as in a
    registration.

    A change applies to what the webhook has not been sent yet: a type or table added is sent from the change on
    (nothing written before it), one taken away is not sent any more; `enabled: false` sends it nothing, and
    `enabled: true` again sends it what is written from then on (nothing written before, while it was disabled or
    earlier). The dispatchers see a change within a second.
    """
    registry, owner = _registry()
    hook_id = _hook_id(hook_id)
    try:
        view = registry.update(owner, hook_id, url=args.get("url"), events=args.get("events"),
                               tables=args["tables"] if "tables" in args else KEEP, enabled=args.get("enabled"))
    except TargetRefused as exc:
        raise WebhookUrlRefused(str(exc), errors={"url": [str(exc)]}) from None
    except NotTheOwnersTable as exc:
        raise InvalidInput("`tables` names tables that this API key did not create",
                           errors={f"tables.{i}": ["not a table of this API key"] for i in exc.indexes}) from None
    except Busy as exc:
        raise WebhookBusy(str(exc), headers={"Retry-After": "1"}) from None
    if view is None:
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    return jsonify(view)


@blp.route("/<hook_id>/deliveries", methods=["GET"])
@blp.arguments(DeliveriesQuery(), location="query")
@blp.response(200, DeliveriesPage)
@blp.problems(_NO_KEY, _NO_HOOK, (422, "a query parameter out of range (`invalid_input`)"), _LIMITED, _STORE_DOWN)
@blp.doc(operationId="listDeliveries", security=KEY_ONLY)
@rate_limits.limited(_CALLS)
def list_deliveries(args, hook_id):
    """The webhook's deliveries log, newest first, a page at a time: each notification sent to it with its status
    (`delivered`, `retrying`, `dead`), its attempts and its last response.

    The log keeps the newest 500 deliveries of a webhook (test messages are not in it). Pass a page's `next` as
    `after` for the next page.
    """
    registry, owner = _registry()
    hook_id = _hook_id(hook_id)
    after = args.get("after", args.get("cursor"))
    page = registry.deliveries(owner, hook_id, None if after is None else int(after), args["limit"])
    if page is None:
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    return jsonify(page)


@blp.route("/<hook_id>/deliveries/<delivery_id>/redeliver", methods=["POST"])
@blp.response(200, Delivery)
@blp.problems(_NO_KEY, (404, "no such webhook of this API key (`webhook_not_found`), no such delivery in its log "
                             "(`delivery_not_found`), or the service runs without API keys (`not_found`)"),
              _LIMITED, _STORE_DOWN)
@blp.doc(operationId="redeliver", security=KEY_ONLY)
@rate_limits.limited(_CALLS, _SENDS)
def redeliver(hook_id, delivery_id):
    """Send one delivery of the log again now (one attempt, within `WEBHOOK_TIMEOUT`, with the same `webhook-id`,
    signed anew) and answer it as listed after that attempt.

    A success makes it `delivered` (and the webhook `ok`); a failure leaves its status as it was (a redelivery is
    not retried). The log keeps each delivery's notification: any delivery it lists can be redelivered, however long
    ago its table's outbox dropped it.
    """
    registry, owner = _registry()
    hook_id = _hook_id(hook_id)
    if not DELIVERY_ID.fullmatch(delivery_id):
        raise DeliveryNotFoundProblem(f"no delivery {delivery_id!r}")
    try:
        view = registry.redeliver(owner, hook_id, delivery_id, float(settings.current().webhook_timeout))
    except DeliveryNotFound as exc:
        raise DeliveryNotFoundProblem(str(exc)) from None
    if view is None:
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    return jsonify(view)


@blp.route("/<hook_id>/secret/rotate", methods=["POST"])
@blp.response(200, WebhookCreated)
@blp.problems(_NO_KEY, _NO_HOOK, _LIMITED,
              (503, "the store (Redis) is unavailable (`store_unavailable`), or the webhook kept changing meanwhile "
                    "(`busy`); retry after `Retry-After`"))
@blp.doc(operationId="rotateWebhookSecret", security=KEY_ONLY)
@rate_limits.limited(_CALLS)
def rotate_webhook_secret(hook_id):
    """A new signing secret for the webhook (shown only in this response); for 24 h (`previous_secret_expires`)
    the secret it replaces signs every delivery too: `webhook-signature` holds two `v1,` signatures, and a
    receiver verifying with either secret accepts it.
    """
    registry, owner = _registry()
    hook_id = _hook_id(hook_id)
    try:
        found = registry.rotate_secret(owner, hook_id)
    except Busy as exc:
        raise WebhookBusy(str(exc), headers={"Retry-After": "1"}) from None
    if found is None:
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    view, secret = found
    response = jsonify({**view, "secret": secret})
    response.headers["Cache-Control"] = "no-store"
    return response
