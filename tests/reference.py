"""An independent, brute-force reference for the rules of docs/rules.md#s1-§5 and §9.

Written from the rule book only: it never imports :mod:`service`.  It is slow and
simple on purpose (recursive enumeration of every decomposition) so that the
property tests can compare the service's lookup-table implementation with it.

Conventions: a tile is an index 0-26 (``m`` 1-9, then ``p`` 1-9, then ``s`` 1-9);
a hand is a 27-long list of concealed counts plus a list of melds
``(type, tile, kind)`` with ``type`` ``"peng"`` or ``"kong"``.

>>> c = counts_of("23445677p345789s")
>>> is_win(c, [])
True
>>> best_fan(c, [], {}, {})["base"], best_fan(c, [], {}, {})["raw_fan"]
('pinghu', 1)
>>> canonical(counts_of("9s 1m3M 2万"))
'123m9s'
"""

from __future__ import annotations

SUIT_LETTERS = "mps"

# §5.1, in the order of the table (the tie-break order).
BASE_ORDER = (
    "pinghu", "duiduihu", "qingyise", "daiyaojiu", "qidui", "qingdui", "jiangdui",
    "longqidui", "qingqidui", "qingyaojiu", "qinglongqidui", "tianhu", "dihu",
)
QQ_BASE = {
    "pinghu": 1, "duiduihu": 2, "qingyise": 3, "daiyaojiu": 3, "qidui": 3, "qingdui": 4,
    "jiangdui": 4, "longqidui": 5, "qingqidui": 5, "qingyaojiu": 5, "qinglongqidui": 6,
    "tianhu": 6, "dihu": 6,
}
# §9: the chengdu table has no separate dragon seven pairs and no 清幺九.
CHENGDU_BASE = {
    "pinghu": 1, "duiduihu": 2, "qingyise": 3, "daiyaojiu": 3, "qidui": 3, "qingdui": 4,
    "jiangdui": 4, "qingqidui": 4, "tianhu": 8, "dihu": 8,
}
QQ_EXTRA = {
    "gen": 1, "gangshanghua": 1, "gangshangpao": 1, "qiangganghu": 1, "zimo": 1, "haidi": 1,
    "jingoudiao": 1, "menqing": 1, "zhongzhang": 1, "jiaxinwu": 1, "kaertiao": 1, "yitiaolong": 1,
}
CHENGDU_EXTRA = dict(QQ_EXTRA, gangshanghua=2, gangshangpao=0)

SUIT_MARK_ALIASES = {
    "m": ("m", "M", "万", "萬"),
    "s": ("s", "S", "条", "條", "索"),
    "p": ("p", "P", "筒", "饼", "餅", "铜", "銅"),
}


# -- notation (a tiny independent parser/formatter for test fixtures) --------
def counts_of(text: str) -> list[int]:
    """Counts of a (well-formed) hand string; accepts every suit mark of §1."""
    mark_to_suit = {mark: suit for suit, marks in SUIT_MARK_ALIASES.items() for mark in marks}
    counts = [0] * 27
    pending: list[int] = []
    for ch in text:
        if ch.isspace():
            assert not pending, f"white space inside a group in {text!r}"
            continue
        if ch in "123456789":
            pending.append(int(ch))
            continue
        suit = mark_to_suit[ch]
        assert pending, f"suit mark with no ranks in {text!r}"
        for r in pending:
            counts[SUIT_LETTERS.index(suit) * 9 + r - 1] += 1
        pending = []
    assert not pending, f"ranks with no suit in {text!r}"
    return counts


def tile_index(text: str) -> int:
    c = counts_of(text)
    assert sum(c) == 1
    return c.index(1)


def tile_name(index: int) -> str:
    return f"{index % 9 + 1}{SUIT_LETTERS[index // 9]}"


def canonical(counts) -> str:
    """§1 canonical form: suits m, p, s; ranks ascending."""
    out = []
    for suit in "mps":
        s = SUIT_LETTERS.index(suit)
        ranks = "".join(str(r + 1) * counts[s * 9 + r] for r in range(9))
        if ranks:
            out.append(ranks + suit)
    return "".join(out)


# -- hands ---------------------------------------------------------------------
def held_counts(counts, melds) -> list[int]:
    held = list(counts)
    for kind, tile, _ in melds:
        held[tile] += 4 if kind == "kong" else 3
    return held


def suits_of(counts, melds) -> set[int]:
    held = held_counts(counts, melds)
    return {i // 9 for i in range(27) if held[i]}


def size_of(counts, melds) -> int:
    return sum(counts) + 3 * len(melds)


def huazhu(counts, melds, void: int | None = None) -> bool:
    suits = suits_of(counts, melds)
    return len(suits) == 3 or (void is not None and void in suits)


# -- shapes ---------------------------------------------------------------------
def standard_decompositions(counts, n_sets: int):
    """Every split of ``counts`` into ``n_sets`` sets plus exactly one pair.

    Yields ``(sets, pair)``; a set is ``("t", i)`` (triplet of tile i) or
    ``("q", i)`` (sequence i, i+1, i+2 of one suit).
    """
    c = list(counts)

    def rec(sets, pair, need):
        i = next((k for k in range(27) if c[k]), None)
        if i is None:
            if need == 0 and pair is not None:
                yield list(sets), pair
            return
        if pair is None and c[i] >= 2:
            c[i] -= 2
            yield from rec(sets, i, need)
            c[i] += 2
        if need > 0 and c[i] >= 3:
            c[i] -= 3
            sets.append(("t", i))
            yield from rec(sets, pair, need - 1)
            sets.pop()
            c[i] += 3
        if need > 0 and i % 9 <= 6 and c[i + 1] and c[i + 2]:
            for k in (i, i + 1, i + 2):
                c[k] -= 1
            sets.append(("q", i))
            yield from rec(sets, pair, need - 1)
            sets.pop()
            for k in (i, i + 1, i + 2):
                c[k] += 1

    yield from rec([], None, n_sets)


def is_seven_pairs(counts, melds) -> bool:
    return not melds and sum(counts) == 14 and all(x % 2 == 0 for x in counts)


def is_shape(counts, melds) -> bool:
    if size_of(counts, melds) != 14:
        return False
    if any(x > 4 for x in held_counts(counts, melds)):
        return False
    if is_seven_pairs(counts, melds):
        return True
    return any(True for _ in standard_decompositions(counts, 4 - len(melds)))


def is_win(counts, melds, void: int | None = None) -> bool:
    """§2-§3: a legal 14-size win (shape, at most two suits, 定缺)."""
    if huazhu(counts, melds, void):
        return False
    return is_shape(counts, melds)


def waits(counts, melds, void: int | None = None) -> list[int]:
    """§4: tiles completing a 13-size hand, excluding tiles held 4 times (死叫)."""
    held = held_counts(counts, melds)
    out = []
    for t in range(27):
        if held[t] >= 4:
            continue
        c = list(counts)
        c[t] += 1
        if is_win(c, melds, void):
            out.append(t)
    return out


# -- fan -------------------------------------------------------------------------
def _has19(tile: int) -> bool:
    return tile % 9 in (0, 8)


def _is258(tile: int) -> bool:
    return tile % 9 in (1, 4, 7)


def _set_has19(kind: str, tile: int) -> bool:
    if kind == "t":
        return _has19(tile)
    return _has19(tile) or _has19(tile + 2)


def _std_patterns(sets, pair, melds, tiles, qing) -> set[str]:
    """Base patterns of §5.1 that one standard decomposition has (besides 平胡/清一色/天胡/地胡)."""
    out = set()
    all_sets = sets + [("t", tile) for _, tile, _ in melds]
    if all(k == "t" for k, _ in all_sets):
        out.add("duiduihu")
        if qing:
            out.add("qingdui")
        if all(_is258(i) for i in tiles):
            out.add("jiangdui")
    if all(_set_has19(k, t) for k, t in all_sets) and _has19(pair):
        out.add("daiyaojiu")
        if qing:
            out.add("qingyaojiu")
    return out


def _readings(counts, melds, flags):
    """Every way to read the hand: ``(sets or None, pattern ids)`` per decomposition (None: seven pairs)."""
    held = held_counts(counts, melds)
    tiles = [i for i in range(27) if held[i]]
    qing = len({i // 9 for i in tiles}) == 1
    common = {"pinghu"} | ({"qingyise"} if qing else set())
    if flags.get("heavenly"):
        common.add("tianhu")
    if flags.get("earthly"):
        common.add("dihu")
    for sets, pair in standard_decompositions(counts, 4 - len(melds)):
        yield sets, common | _std_patterns(sets, pair, melds, tiles, qing)
    if is_seven_pairs(counts, melds):
        dragon = any(x == 4 for x in counts)
        pats = set(common)
        if dragon:
            pats.add("qinglongqidui" if qing else "longqidui")
        else:
            pats.add("qingqidui" if qing else "qidui")
        yield None, pats


def base_patterns(counts, melds, flags) -> set[str]:
    """Every base pattern of §5.1 that applies to some decomposition of the hand."""
    out: set[str] = set()
    for _, pats in _readings(counts, melds, flags):
        out |= pats
    return out


def run_extras(sets, win_tile, only_wait_2s: bool, rules: dict) -> list[str]:
    """§5.2's 夹心五, 卡二条 and 一条龙 of one standard decomposition (the ones switched on)."""
    seqs = {t for k, t in sets if k == "q"}
    out = []
    # 夹心五: the winning 5 in the middle of a 4-5-6 of its suit (it can be that copy)
    if rules.get("jiaxinwu") and win_tile is not None and win_tile % 9 == 4 and win_tile - 1 in seqs:
        out.append("jiaxinwu")
    # 卡二条: 2s was the only wait and the winning 2s is the middle of a 1-2-3 of 条
    if rules.get("kaertiao") and win_tile == 19 and only_wait_2s and 18 in seqs:
        out.append("kaertiao")
    # 一条龙: 123, 456 and 789 of one suit
    if rules.get("yitiaolong") and any({s * 9, s * 9 + 3, s * 9 + 6} <= seqs for s in range(3)):
        out.append("yitiaolong")
    return out


def best_fan(counts, melds, flags: dict, rules: dict, win_tile: int | None = None, void: int | None = None) -> dict:
    """The score of a winning hand per §5 / §9 (the caller checks it wins).

    ``flags``: self_drawn, after_kong, robbing_kong, last_tile, heavenly, earthly.
    ``rules``: fan_table, scoring, base, cap, zimo, haidi, jingoudiao, menqing,
    zhongzhang, jiaxinwu, kaertiao, yitiaolong (defaults of the xuezhan preset).
    ``win_tile`` (and the hand's ``void``, for its waits) is needed for 夹心五 and 卡二条.
    The fan is the highest total over every (decomposition, base pattern) pair (§3).
    """
    table = rules.get("fan_table", "qq")
    base_table = dict(QQ_BASE if table == "qq" else CHENGDU_BASE)
    extra_table = QQ_EXTRA if table == "qq" else CHENGDU_EXTRA
    if (rules.get("jiaxinwu") or rules.get("kaertiao")) and win_tile is None:
        raise ValueError("夹心五 and 卡二条 need the winning tile")
    only_2s = False
    if rules.get("kaertiao") and win_tile == 19:
        before = list(counts)
        before[19] -= 1
        only_2s = waits(before, melds, void) == [19]
    candidates = []  # (pattern id, its run extras)
    for sets, pats in _readings(counts, melds, flags):
        runs = [] if sets is None else run_extras(sets, win_tile, only_2s, rules)
        for pid in pats:
            if table == "chengdu":
                # 龙七对 = 七对, 清龙七对 = 清七对; every four adds its 根 (no 减1根); no 清幺九 (§9)
                pid = {"longqidui": "qidui", "qinglongqidui": "qingqidui"}.get(pid, pid)
                if pid not in base_table:
                    continue
            candidates.append((pid, tuple(runs)))

    held = held_counts(counts, melds)
    fours = sum(1 for x in held if x == 4)
    sd = flags.get("self_drawn", False)
    extras: dict[str, int] = {}
    if flags.get("after_kong"):
        if sd:
            extras["gangshanghua"] = extra_table["gangshanghua"]
        else:
            extras["gangshangpao"] = extra_table["gangshangpao"]
    if flags.get("robbing_kong"):
        extras["qiangganghu"] = extra_table["qiangganghu"]
    if sd and rules.get("zimo", "none") == "fan":
        extras["zimo"] = extra_table["zimo"]
    if flags.get("last_tile") and rules.get("haidi", False):
        extras["haidi"] = extra_table["haidi"]
    if rules.get("jingoudiao", False) and len(melds) == 4:
        extras["jingoudiao"] = extra_table["jingoudiao"]
    if rules.get("menqing", False) and all(k == "kong" and kind == "concealed" for k, _, kind in melds):
        extras["menqing"] = extra_table["menqing"]
    if rules.get("zhongzhang", False) and not any(_has19(i) for i in range(27) if held[i]):
        extras["zhongzhang"] = extra_table["zhongzhang"]

    best: tuple[tuple[int, int, int], str, int, tuple[str, ...]] | None = None  # (rank, pattern, gens, runs)
    for pid, run_ids in candidates:
        gens = fours - (1 if table == "qq" and pid in ("longqidui", "qinglongqidui") else 0)
        total = (base_table[pid] + gens * extra_table["gen"] + sum(extras.values())
                 + sum(extra_table[r] for r in run_ids))
        rank = (total, base_table[pid], -BASE_ORDER.index(pid))
        if best is None or rank > best[0]:
            best = (rank, pid, gens, run_ids)
    if best is None:
        raise ValueError("no reading of the hand wins (the caller checks it wins)")
    (raw, base_fan, _), pid, gens, run_ids = best
    listed = {pid: base_fan}
    if gens:
        listed["gen"] = gens * extra_table["gen"]
    listed.update(extras)
    listed.update({r: extra_table[r] for r in run_ids})
    listed = {k: v for k, v in listed.items() if v}

    cap = rules.get("cap")
    fan = min(raw, cap) if cap is not None else raw
    mult = 2 ** (fan - 1) if rules.get("scoring", "exponential") == "exponential" else fan
    return {
        "base": pid,
        "raw_fan": raw,
        "fan": fan,
        "capped": cap is not None and raw > cap,
        "points": rules.get("base", 6) * mult,
        "gens": gens,
        "runs": run_ids,
        "patterns": listed,
    }
