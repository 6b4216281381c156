"""A keyed table creation's secrets: its table id and its sealed first response.

A creation's ``Idempotency-Key`` is a secret (a UUID the client generated): the
table id is derived from it (:func:`created_id`), so a retry finds the table,
and the tokens of the first response are kept sealed with AES-256-GCM under a
key derived from it by HKDF-SHA256 (:func:`seal`), bound to the table id.
Redis never sees the Idempotency-Key, so what Redis holds cannot give the
tokens away.

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

import hashlib
import os
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

NONCE_BYTES = 12


def _cipher(idempotency_key: str) -> AESGCM:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
               info=b"mahjong-service table creation v2").derive(idempotency_key.encode())
    return AESGCM(key)


def seal(idempotency_key: str, table_id: str, secret: Any) -> bytes:
    """``secret`` (JSON) encrypted and authenticated under the Idempotency-Key, bound to ``table_id``."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + _cipher(idempotency_key).encrypt(nonce, orjson.dumps(secret), table_id.encode())


def unseal(idempotency_key: str, table_id: str, sealed: bytes) -> Any:
    """What :func:`seal` sealed; ``cryptography.exceptions.InvalidTag`` for another key or table."""
    return orjson.loads(_cipher(idempotency_key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:],
                                                         table_id.encode()))


def created_id(idempotency_key: str, owner: str | None = None) -> str:
    """The id of the table an Idempotency-Key creates (so that a retry finds it).

    With an ``owner`` (an API key's name) the key is scoped to it: the same
    key sent with another API key makes (or finds) another table.
    """
    scope = b"" if owner is None else owner.encode() + b"\x00"
    return hashlib.sha256(b"table-id:" + scope + idempotency_key.encode()).hexdigest()[:16]
