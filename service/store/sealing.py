"""Secrets Redis keeps sealed: a keyed table creation's first response, a keyed token rotation's, and
webhooks' secrets.

A creation's ``Idempotency-Key`` is a secret (a UUID the client generated): the
table id is derived from it (:func:`created_id`), so a retry finds the table,
and the tokens of the first response are kept sealed with AES-256-GCM under a
key derived from it by HKDF-SHA256 (:func:`seal`), bound to the table id.
Redis never sees the Idempotency-Key, so what Redis holds cannot give the
tokens away.

A token rotation's new tokens are sealed the same way (:func:`seal_rotation`), under a key derived
from its Idempotency-Key *and* the credential it was sent with (the old write token, or the API
key), neither of which Redis sees: only the caller that rotated can open them again.

>>> sealed = seal_rotation("k", "old-token", "t1", ["a", "b"])
>>> unseal_rotation("k", "old-token", "t1", sealed)
['a', 'b']
>>> unseal_rotation("k", "another-token", "t1", sealed)
Traceback (most recent call last):
...
cryptography.exceptions.InvalidTag

>>> sealed = seal("k", "t1", ["a", "b"])
>>> unseal("k", "t1", sealed)
['a', 'b']
>>> unseal("k", "t2", sealed)
Traceback (most recent call last):
...
cryptography.exceptions.InvalidTag
>>> created_id("k") == created_id("k"), created_id("k") == created_id("k", owner="acme"), len(created_id("k"))
(True, False, 16)
"""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

NONCE_BYTES = 12


_CREATION = b"mahjong-service table creation v2"
_ROTATION = b"mahjong-service token rotation v1"


def _cipher(material: bytes, info: bytes = _CREATION) -> AESGCM:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(material)
    return AESGCM(key)


def _seal(cipher: AESGCM, table_id: str, secret: Any) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    return nonce + cipher.encrypt(nonce, orjson.dumps(secret), table_id.encode())


def _unseal(cipher: AESGCM, table_id: str, sealed: bytes) -> Any:
    return orjson.loads(cipher.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], table_id.encode()))


def seal(idempotency_key: str, table_id: str, secret: Any) -> bytes:
    """``secret`` (JSON) encrypted and authenticated under the Idempotency-Key, bound to ``table_id``."""
    return _seal(_cipher(idempotency_key.encode()), table_id, secret)


def unseal(idempotency_key: str, table_id: str, sealed: bytes) -> Any:
    """What :func:`seal` sealed; ``cryptography.exceptions.InvalidTag`` for another key or table."""
    return _unseal(_cipher(idempotency_key.encode()), table_id, sealed)


def _rotation_cipher(idempotency_key: str, credential: str) -> AESGCM:
    return _cipher(idempotency_key.encode() + b"\x00" + credential.encode(), _ROTATION)


def seal_rotation(idempotency_key: str, credential: str, table_id: str, tokens: Any) -> bytes:
    """A rotation's new ``tokens`` sealed under its Idempotency-Key and the ``credential`` the rotation
    was sent with (the old write token, or the API key), bound to ``table_id``."""
    return _seal(_rotation_cipher(idempotency_key, credential), table_id, tokens)


def unseal_rotation(idempotency_key: str, credential: str, table_id: str, sealed: bytes) -> Any:
    """What :func:`seal_rotation` sealed; ``InvalidTag`` for another key, credential or table."""
    return _unseal(_rotation_cipher(idempotency_key, credential), table_id, sealed)


def created_id(idempotency_key: str, owner: str | None = None) -> str:
    """The id of the table an Idempotency-Key creates (so that a retry finds it).

    With an ``owner`` (an API key's name) the key is scoped to it: the same
    key sent with another API key makes (or finds) another table.
    """
    scope = b"" if owner is None else owner.encode() + b"\x00"
    return hashlib.sha256(b"table-id:" + scope + idempotency_key.encode()).hexdigest()[:16]


# -- webhook secrets ------------------------------------------------------------------------------
def _webhook_cipher(key_digest: str) -> AESGCM:
    return AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                       info=b"mahjong-service webhook secret v1").derive(bytes.fromhex(key_digest)))


def seal_secret(key_digest: str, owner: str, hook_id: str, secret: str) -> str:
    """``secret`` sealed under the owner's API key digest, bound to the owner and the webhook (base64).

    >>> d = "ab" * 32
    >>> unseal_secret(d, "acme", "wh_1", seal_secret(d, "acme", "wh_1", "whsec_x"))
    'whsec_x'
    """
    nonce = os.urandom(NONCE_BYTES)
    sealed = _webhook_cipher(key_digest).encrypt(nonce, secret.encode(), f"{owner}\0{hook_id}".encode())
    return base64.b64encode(nonce + sealed).decode()


def unseal_secret(key_digest: str, owner: str, hook_id: str, sealed: str) -> str:
    """What :func:`seal_secret` sealed; ``InvalidTag`` under another key digest, owner or webhook."""
    raw = base64.b64decode(sealed)
    associated = f"{owner}\0{hook_id}".encode()
    return _webhook_cipher(key_digest).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], associated).decode()

