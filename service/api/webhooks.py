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
  its ``status`` is not changed by a test).
* An API key has at most 20 webhooks (409 ``too_many_webhooks``).
"""

from __future__ import annotations

import re

import marshmallow as ma
from flask import current_app, jsonify
from marshmallow import fields, validate

from ..webhooks.delivery import MAX_URL_CHARS, TargetRefused
from ..webhooks.registry import EVENTS, MAX_TABLES, NotTheOwnersTable, Registry, TooManyWebhooks
from . import rate_limits, settings
from .callers import api_key
from .problems import ApiProblem, InvalidInput, WithoutApiKeys
from .smorest import Blueprint
from .table_views import StoreNotConfigured

blp = Blueprint("webhooks", __name__, url_prefix="/v1/webhooks",
                description="Signed notifications of an API key's tables, sent to its backend.")

HOOK_ID = re.compile(r"wh_[0-9a-f]{16}")
KEY_ONLY = [{"apiKey": []}]
_NO_KEY = (401, "no `X-API-Key`, or not a key of the service (`api_key_required`, `api_key_invalid`)")
_NO_HOOK = (404, "no such webhook of this API key (`webhook_not_found`), or the service runs without API keys "
                 "(`not_found`)")
_STORE_DOWN = (503, "the store (Redis) is unavailable (`store_unavailable`); retry after `Retry-After`")


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
    created = fields.String(required=True, metadata={"description": "when it was registered (UTC, ISO 8601)"})
    status = fields.String(required=True, validate=validate.OneOf(("ok", "failing")), metadata={
        "description": "`failing` from a dead-lettered notification until a delivery succeeds"})
    last_delivery = fields.Nested(LastDelivery, required=True, allow_none=True)
    dead_letters = fields.Integer(required=True, metadata={
        "description": "notifications given up on after the retry budget (about a day)"})


class WebhookCreated(WebhookView):
    secret = fields.String(required=True, metadata={
        "description": "the signing secret (`whsec_…`, Standard Webhooks): shown only here"})


class WebhooksPage(ma.Schema):
    webhooks = fields.List(fields.Nested(WebhookView), required=True, metadata={"description": "oldest first"})


# -- problems ------------------------------------------------------------------------------------
class WebhookNotFound(ApiProblem):
    status, code, title = 404, "webhook_not_found", "Webhook not found"


class WebhookUrlRefused(ApiProblem):
    status, code, title = 422, "webhook_url_refused", "Webhook URL refused"


class TooManyWebhooksProblem(ApiProblem):
    status, code, title = 409, "too_many_webhooks", "Too many webhooks"


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
              (409, "the API key has 20 webhooks already (`too_many_webhooks`)"), 413, 415,
              (422, "the body breaks the schema (`invalid_input`; a table that is not the key's is named in "
                    "`errors`), or the URL is not one the service sends to (`webhook_url_refused`: not http(s), "
                    "credentials in it, a host that does not resolve or resolves to a loopback, private or "
                    "link-local address)"), _STORE_DOWN)
@blp.doc(operationId="createWebhook", security=KEY_ONLY)
@rate_limits.unlimited("an API key's own webhooks (X-API-Key only), at most 20 a key; each request one or two Redis calls")
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
@blp.problems(_NO_KEY, (404, "the service runs without API keys (`not_found`)"), _STORE_DOWN)
@blp.doc(operationId="listWebhooks", security=KEY_ONLY)
@rate_limits.unlimited("an API key's own webhooks (X-API-Key only), at most 20 a key; each request one or two Redis calls")
def list_webhooks():
    """The API key's webhooks, oldest first, each with its status and last delivery."""
    registry, owner = _registry()
    return jsonify({"webhooks": registry.all(owner)})


@blp.route("/<hook_id>", methods=["GET"])
@blp.response(200, WebhookView)
@blp.problems(_NO_KEY, _NO_HOOK, _STORE_DOWN)
@blp.doc(operationId="getWebhook", security=KEY_ONLY)
@rate_limits.unlimited("an API key's own webhooks (X-API-Key only), at most 20 a key; each request one or two Redis calls")
def get_webhook(hook_id):
    """One of the API key's webhooks, with its status (`ok`, `failing`) and its last delivery."""
    registry, owner = _registry()
    view = registry.get(owner, _hook_id(hook_id))
    if view is None:
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    return jsonify(view)


@blp.route("/<hook_id>", methods=["DELETE"])
@blp.response(204)
@blp.problems(_NO_KEY, _NO_HOOK, _STORE_DOWN)
@blp.doc(operationId="deleteWebhook", security=KEY_ONLY)
@rate_limits.unlimited("an API key's own webhooks (X-API-Key only), at most 20 a key; each request one or two Redis calls")
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
@blp.problems(_NO_KEY, _NO_HOOK, _STORE_DOWN)
@blp.doc(operationId="testWebhook", security=KEY_ONLY)
@rate_limits.unlimited("an API key's own webhooks (X-API-Key only): one attempt, within WEBHOOK_TIMEOUT, to the key's own registered URL")
def test_webhook(hook_id):
    """Send a signed `webhook.test` message to the webhook now (one attempt) and answer the webhook with
    that attempt as its `last_delivery`."""
    registry, owner = _registry()
    view = registry.test(owner, _hook_id(hook_id), float(settings.current().webhook_timeout))
    if view is None:
        raise WebhookNotFound(f"no webhook {hook_id!r}")
    return jsonify(view)
