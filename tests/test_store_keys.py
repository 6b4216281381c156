"""Every key a store script touches is one of its KEYS (Redis Cluster routes a script by its KEYS and
checks only those across nodes: within one node it would let a script reach an undeclared key).

The scripts are read, not run: every ``redis.call``'s key arguments must be ``KEYS[...]`` (or a name
bound to one), so this fails for a script that builds a key name in Lua.
"""

from __future__ import annotations

import re

import pytest

from service.store import keys

SCRIPTS = {
    name: getattr(keys, name)
    for name in (
        "CREATE",
        "APPEND",
        "DELETE",
        "READ",
        "REPAIR",
        "TOUCH",
        "FINISH",
        "ROTATE",
        "RENEW",
        "RELEASE",
        "ADVANCE",
        "TRIM",
        "REGISTER",
        "UNREGISTER",
        "REVISE",
        "HINT",
        "NOTE",
        "ROUND",
        "FOLLOW",
        "CLUB_CREATE",
        "CLUB_APPLY",
        "HIT",
    )
}
MULTI_KEY = {"DEL", "EXISTS", "UNLINK", "TOUCH"}  # every argument is a key
CALL = re.compile(r"redis\.p?call\((?P<args>[^()]*(?:\([^()]*\)[^()]*)*)\)")


def split_args(text: str) -> list[str]:
    out, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
            continue
        depth += ch in "({"
        depth -= ch in ")}"
        current += ch
    return out + [current.strip()]


def key_names(script: str) -> set[str]:
    """Lua names that hold a key: READ's ``key`` (bound to ``KEYS[...]`` in its loop) and touch()'s parameter
    ``key`` when every call of touch() passes a ``KEYS[...]``."""
    names = set()
    if re.search(r"local name, key = read\[1\], KEYS\[", script):
        names.add("key")
    touches = re.findall(r"(?<!function )\btouch\(([^)]*)\)", script)
    if "local function touch(key)" in script and all(re.fullmatch(r"KEYS\[\d+\]", t) for t in touches):
        names.add("key")
    return names


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_key_a_script_touches_is_in_keys(name):
    script = SCRIPTS[name]
    allowed = key_names(script)
    calls = CALL.findall(script)
    assert calls, name
    for args_text in calls:
        args = split_args(args_text)
        command = args[0].strip("'\"").upper()
        targets = args[1:] if command in MULTI_KEY else args[1:2]
        for target in targets:
            assert re.fullmatch(r"KEYS\[[^\]]+\]", target) or target in allowed, (
                f"{name}: redis.call({args_text}) touches {target!r}, which is not one of KEYS"
            )


def test_the_check_catches_a_key_built_in_lua():
    bad = "redis.call('DEL', KEYS[1], KEYS[2] .. ':x')\nredis.call('GET', 'rl:' .. ARGV[1])"
    calls = [split_args(c) for c in CALL.findall(bad)]
    assert [c[2] for c in calls if c[0] == "'DEL'"] == ["KEYS[2] .. ':x'"]
    assert not re.fullmatch(r"KEYS\[\d+\]", calls[1][1])


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_script_takes_one_json_object_of_named_arguments(name):
    """The one argument convention (service/store/keys.py): ARGV[1] decoded once as ``a``, no other ARGV."""
    script = SCRIPTS[name]
    uses = re.findall(r"ARGV\[[^\]]*\]|#ARGV|unpack\(ARGV", script)
    assert uses in ([], ["ARGV[1]"]), f"{name} reads {uses}"
    assert not uses or "local a = cjson.decode(ARGV[1])" in script


def test_a_reply_is_read_by_name():
    assert keys.reply([b"outcome", b"limited", b"retry_ms", 1200]) == {"outcome": b"limited", "retry_ms": 1200}
    assert keys.args(a=None, b=[1, "x"], c=True) == [b'{"b":[1,"x"],"c":true}']
