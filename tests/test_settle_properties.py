"""Property tests for round settlement (docs/rules.md#s6-§8, §10, §13, §14) over random VALID rounds.

The generator below keeps its own model of a round (who is still in, logged pengs
and kongs, every copy of every tile the round has shown, the kong income and who
paid it, and in 血流 each winner's kept hand) and only emits events that can happen:
kongs with payments, pengs then added kongs, hus with a declared fan or with a real
winning hand (random sets and a pair in at most two suits, the seat's logged melds
included; in 血流 a winner's kept hand plus one of its waits), 杠上炮/杠上花/抢杠胡 right
after the right kong, 天胡/地胡 when allowed, draws with random statuses or 13-tile
hands, escapes (also by winners in 血战), under random rulesets (a preset plus random
overrides: 血流成河, three players, dianpao_pinghu, the run extras ...).

Besides the structural properties asked for (zero sum, deltas = fold of the
transfers, winners never pay/collect after winning in 血战, determinism, prefix
stability, to_dict/from_dict round-trip, ``Round.apply`` leaving the original alone
on error, no fifth copy across repeated 血流 wins, a table's balances = the fold of
its log), the model also predicts, from docs/rules.md alone, the exact transfers of every
kong, of every hu whose winners declare their fan, of every escape, of every draw
whose seats declare statuses, and of every forfeit; those predictions are compared
with the engine's output.  Where a prediction needs a hand's fan (a 血流 winner's
大叫, a 1-fan win under dianpao_pinghu = false) it comes from the independent
brute-force reference (tests/reference.py), never from the service.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.rules.errors import EventError
from service.rules.patterns import SWITCHES
from service.rules.settle import Round, settle
from service.rules.table import TableState, fold
from tests import reference as ref

SUIT = "mps"                       # tile index = suit * 9 + rank - 1 (canonical m, p, s)
REASONS = {"kong_direct", "kong_added", "kong_concealed", "kong_void", "dianpao", "zimo",
           "transfer", "refund", "huazhu", "dajiao", "escape", "forfeit"}


def tile_str(t: int) -> str:
    return f"{t % 9 + 1}{SUIT[t // 9]}"


def hand_str(counts) -> str:
    out = []
    for s in range(3):
        ranks = "".join(str(r + 1) * counts[s * 9 + r] for r in range(9))
        if ranks:
            out.append(ranks + SUIT[s])
    return "".join(out)


# -- the rule sets (docs/rules.md#s9, typed in from the rule book) ---------------------------
PRESETS = {
    "xuezhan": dict(mode="xuezhan", fan_table="qq", scoring="exponential", base=6, cap=None, zimo="none",
                    direct_kong=1, added_kong=1, concealed_kong=2, dianganghua="self_draw", huazhu=16,
                    huazhu_pays_winners=True, dajiao="max", escape=16, winner_leaves="deferred",
                    next_dealer="winner", players=4, dianpao_pinghu=True, xueliu_dajiao_winners=False),
}
PRESETS["normal"] = dict(PRESETS["xuezhan"], mode="normal", next_dealer="discarder")
PRESETS["chengdu-points"] = dict(PRESETS["xuezhan"], mode="normal", fan_table="chengdu", scoring="linear",
                                 base=1, direct_kong=0, added_kong=0, concealed_kong=0,
                                 dianganghua="discard", huazhu=0, dajiao="min")
PRESETS["xueliu"] = dict(PRESETS["xuezhan"], mode="xueliu")
PRESETS["sanren-liangfang"] = dict(PRESETS["xuezhan"], players=3, dianpao_pinghu=False, huazhu=0, direct_kong=2,
                                   cap=4)

OVERRIDES = {
    "mode": st.sampled_from(["xuezhan", "normal", "xueliu"]),
    "fan_table": st.sampled_from(["qq", "chengdu"]),
    "scoring": st.sampled_from(["exponential", "linear"]),
    "base": st.integers(1, 12),
    "cap": st.none() | st.integers(1, 8),
    "zimo": st.sampled_from(["none", "base", "fan"]),
    "direct_kong": st.integers(0, 3),
    "added_kong": st.integers(0, 3),
    "concealed_kong": st.integers(0, 4),
    "dianganghua": st.sampled_from(["self_draw", "discard"]),
    "huazhu": st.integers(0, 20),
    "huazhu_pays_winners": st.booleans(),
    "dajiao": st.sampled_from(["max", "min"]),
    "escape": st.integers(0, 20),
    "winner_leaves": st.sampled_from(["deferred", "forfeit"]),
    "next_dealer": st.sampled_from(["winner", "discarder"]),
    **{name: st.booleans() for name in SWITCHES},  # every pattern switch of the registry
    "players": st.sampled_from([4, 3]),
    "dianpao_pinghu": st.booleans(),
    "xueliu_dajiao_winners": st.booleans(),
}


def resolve(preset: str, over: dict) -> dict:
    """The fields of a ruleset spec, from the rule book: the preset, the overrides, §14.2's forced huazhu."""
    R = dict(PRESETS[preset], **dict.fromkeys(SWITCHES, False))
    R.update(over)
    if R["players"] == 3:
        R["huazhu"] = 0          # no 花猪 with three players, whatever is asked
    return R


@st.composite
def rulesets(draw):
    preset = draw(st.sampled_from(sorted(PRESETS)))
    names = draw(st.lists(st.sampled_from(sorted(OVERRIDES)), unique=True, max_size=8))
    over = {n: draw(OVERRIDES[n]) for n in sorted(names)}
    spec = {"preset": preset, **over}
    return spec, resolve(preset, over)


def win_points(fan: int, R: dict) -> int:
    """§5.3: fan clipped to the cap, then base × 2^(fan-1) or base × fan."""
    if R["cap"] is not None:
        fan = min(fan, R["cap"])
    return R["base"] * (2 ** (fan - 1) if R["scoring"] == "exponential" else fan)


def ref_fan(counts, melds, flags: dict, R: dict, tile: int, void) -> int:
    """A winning hand's total fan before the cap, by the brute-force reference."""
    return ref.best_fan(counts, melds, flags, R, win_tile=tile, void=void)["raw_fan"]


def ref_dajiao(counts, melds, void, R: dict) -> int:
    """§4: a ting hand's 大叫 points (max or min over its waits), by the brute-force reference."""
    pts = []
    for t in ref.waits(counts, melds, void):
        c = list(counts)
        c[t] += 1
        pts.append(ref.best_fan(c, melds, {}, R, win_tile=t, void=void)["points"])
    return (max(pts) if R["dajiao"] == "max" else min(pts)) if pts else 0


# -- hand building ------------------------------------------------------------------------
def build_win(rnd: random.Random, melds, void, avail, need=None, suits_in_play=(0, 1, 2)):
    """Concealed counts of a winning 14-size hand (with ``melds``) using at most ``avail``
    copies, two suits at most, none of the void suit, holding ``need``; or None."""
    if len(melds) > 4:
        return None
    msuits = {t // 9 for _, t, _ in melds}
    if void is not None and void in msuits:
        return None
    if len(msuits) > 2:
        return None
    allowed = [s for s in suits_in_play if s != void]
    suits = set(msuits)
    if need is not None:
        if need // 9 not in allowed:
            return None
        suits.add(need // 9)
    if len(suits) > 2:
        return None
    while len(suits) < 2 and rnd.random() < 0.6:
        suits.add(rnd.choice(allowed))
    if not suits:
        suits.add(rnd.choice(allowed))
    in_hand = sorted(suits)
    n_sets = 4 - len(melds)
    for _ in range(40):
        a = list(avail)
        c = [0] * 27
        pieces = ["set"] * n_sets + ["pair"]
        rnd.shuffle(pieces)
        ok = True
        first = need is not None
        for piece in pieces:
            placed = False
            for _ in range(15):
                if first:
                    t = need
                    s, r = t // 9, t % 9
                else:
                    s = rnd.choice(in_hand)
                    r = rnd.randrange(9)
                    t = s * 9 + r
                if piece == "pair":
                    tiles = [t, t]
                elif rnd.random() < 0.35:
                    tiles = [t, t, t]
                else:
                    lo = r - rnd.randrange(3) if first else r
                    if lo < 0 or lo > 6:
                        continue
                    tiles = [s * 9 + lo, s * 9 + lo + 1, s * 9 + lo + 2]
                need_c = Counter(tiles)
                if all(a[x] >= k for x, k in need_c.items()):
                    for x, k in need_c.items():
                        a[x] -= k
                        c[x] += k
                    placed = True
                    first = False
                    break
            if not placed:
                ok = False
                break
        if ok and (need is None or c[need]):
            return c
    return None


def random_13(rnd: random.Random, melds, avail, suits_in_play=(0, 1, 2)):
    """Any 13-size hand: the melds plus random concealed tiles that are still available."""
    n = 13 - 3 * len(melds)
    if n < 1:
        return None
    k = min(rnd.choice([1, 2, 2, 3]), len(suits_in_play))
    suits = rnd.sample(list(suits_in_play), k)
    pool = [t for t in range(27) if t // 9 in suits for _ in range(avail[t])]
    if len(pool) < n:
        return None
    c = [0] * 27
    for t in rnd.sample(pool, n):
        c[t] += 1
    return c


def hand_json(counts, melds):
    """The API hand; its 定缺 suit comes from the ``voids`` given to settle."""
    return {"tiles": hand_str(counts), "melds": [
        {"type": "peng", "tile": tile_str(t)} if typ == "peng" else {"type": "kong", "kind": kind, "tile": tile_str(t)}
        for typ, t, kind in melds]}


# -- the model ------------------------------------------------------------------------------
@dataclass
class Model:
    R: dict
    dealer: int
    voids: list
    used: list = field(default_factory=lambda: [0] * 27)
    won: list = field(default_factory=list)        # seats that have won, in the order of their first win
    left: list = field(default_factory=list)
    melds: list = field(default_factory=lambda: [[] for _ in range(4)])   # (type, tile, kind)
    pengs: list = field(default_factory=lambda: [[] for _ in range(4)])   # addable pengs
    pengs_logged: list = field(default_factory=lambda: [False] * 4)
    kept: list = field(default_factory=lambda: [None] * 4)   # 血流: (counts, melds) of a winner's kept hand
    any_meld: bool = False
    ended: bool = False
    events: list = field(default_factory=list)
    last: tuple | None = None             # ("kong", seat, kind, tile, from, index) etc.
    kongs: dict = field(default_factory=dict)   # index -> dict(seat, kind, paid[(payer, pts)], void, moved)
    expected: dict = field(default_factory=dict)  # event index -> list of (payer, payee, pts, reason) or None
    win_event: dict = field(default_factory=dict)   # seat -> index of its first win
    leave_event: dict = field(default_factory=dict)
    first_win: tuple | None = None
    order: list = field(default_factory=list)      # winners in order (each seat once)

    @property
    def n(self) -> int:
        return self.R["players"]

    @property
    def xueliu(self) -> bool:
        return self.R["mode"] == "xueliu"

    @property
    def suits(self) -> tuple:
        """The suits in play: 筒 and 条 only with three players (§14.1)."""
        return (1, 2) if self.n == 3 else (0, 1, 2)

    @property
    def tiles(self) -> list:
        return [t for t in range(27) if t // 9 in self.suits]

    @property
    def active(self):
        """Seats in the round: not left, and (but in 血流) not won."""
        return [s for s in range(self.n) if s not in self.left and (self.xueliu or s not in self.won)]

    def has_won(self, seat) -> bool:
        return self.xueliu and seat in self.won

    @property
    def avail(self):
        return [4 - u for u in self.used]

    def unit(self, n):
        return n * self.R["base"]


Transfer = tuple[int, int, int, str]
"""An expected transfer: (payer, payee, points, reason)."""


def pay(out, payer, payee, pts, reason):
    if pts and payer != payee:
        out.append((payer, payee, pts, reason))


def kept_kong_options(m: Model, seat):
    """A 血流 winner's kongs that fit its known kept hand and leave its waits unchanged (§13.2)."""
    counts, melds = m.kept[seat]
    void = m.voids[seat]
    before = ref.waits(counts, melds, void)
    out = []
    for t in m.tiles:
        if counts[t] == 3 and m.used[t] == 3:
            c = list(counts)
            c[t] -= 3
            new = melds + [("kong", t, "concealed")]
            if ref.waits(c, new, void) == before:
                out.append(("concealed", t, c, new))
    for typ, t, _ in melds:
        if typ == "peng" and m.used[t] == 3 and t in m.pengs[seat]:
            new = [("kong", t, "added") if (tp == "peng" and tt == t) else (tp, tt, k) for tp, tt, k in melds]
            if ref.waits(counts, new, void) == before:
                out.append(("added", t, list(counts), new))
    return out


def gen_kong(m: Model, draw, rnd) -> bool:
    act = m.active
    seat = draw(st.sampled_from(act))
    others = [s for s in act if s != seat]
    i = len(m.events)
    exp: list[Transfer] = []
    if m.has_won(seat) and m.kept[seat] is not None:
        options = kept_kong_options(m, seat)
        if not options:
            return False
        kind, t, counts, new_melds = draw(st.sampled_from(options))
        m.kept[seat] = (counts, new_melds)
        m.used[t] += 1                           # the drawn fourth (three were in the kept hand, or the peng)
        if kind == "added":
            m.pengs[seat].remove(t)
            m.melds[seat] = [(("kong", t, "added") if (typ == "peng" and tt == t) else (typ, tt, k))
                             for typ, tt, k in m.melds[seat]]
        else:
            m.melds[seat].append(("kong", t, "concealed"))
        frm = None
        paid = [(s, m.unit(m.R["added_kong" if kind == "added" else "concealed_kong"])) for s in others]
        ev = {"type": "kong", "seat": seat, "kind": kind, "tile": tile_str(t)}
    else:
        kinds = ["concealed", "added"] + ([] if m.has_won(seat) else ["direct"])   # no 直杠 after a 血流 win
        kind = draw(st.sampled_from(kinds))
        if kind == "added":
            choices = [t for t in m.pengs[seat] if m.used[t] == 3]
            if choices and draw(st.booleans()):
                t = draw(st.sampled_from(choices))
                m.pengs[seat].remove(t)
                m.melds[seat] = [(("kong", t, "added") if (typ == "peng" and tt == t) else (typ, tt, k))
                                 for typ, tt, k in m.melds[seat]]
                m.used[t] += 1
            elif not m.pengs_logged[seat]:
                free = [t for t in m.tiles if m.used[t] == 0]
                if not free:
                    return False
                t = draw(st.sampled_from(free))
                m.used[t] += 4
                m.melds[seat].append(("kong", t, "added"))
            else:
                return False
            paid = [(s, m.unit(m.R["added_kong"])) for s in others]
            ev = {"type": "kong", "seat": seat, "kind": "added", "tile": tile_str(t)}
            frm = None
        else:
            free = [t for t in m.tiles if m.used[t] == 0]
            if not free or not others:
                return False
            t = draw(st.sampled_from(free))
            m.used[t] += 4
            m.melds[seat].append(("kong", t, kind))
            if kind == "direct":
                frm = draw(st.sampled_from(others))
                paid = [(frm, m.unit(m.R["direct_kong"]))]
                ev = {"type": "kong", "seat": seat, "kind": "direct", "tile": tile_str(t), "from": frm}
            else:
                frm = None
                paid = [(s, m.unit(m.R["concealed_kong"])) for s in others]
                ev = {"type": "kong", "seat": seat, "kind": "concealed", "tile": tile_str(t)}
    paid = [(p, pts) for p, pts in paid if pts]
    for p, pts in paid:
        pay(exp, p, seat, pts, "kong_" + kind)
    m.kongs[i] = {"seat": seat, "kind": kind, "tile": t, "from": frm, "paid": paid, "void": False, "moved": False}
    m.any_meld = True
    m.expected[i] = exp
    m.last = ("kong", seat, kind, t, frm, i)
    m.events.append(ev)
    return True


def gen_peng(m: Model, draw, rnd) -> bool:
    act = m.active
    claimers = [s for s in act if not m.has_won(s)]      # a 血流 winner may not 碰
    if len(act) < 2 or not claimers:
        return False
    seat = draw(st.sampled_from(claimers))
    frm = draw(st.sampled_from([s for s in act if s != seat]))
    free = [t for t in m.tiles if m.used[t] <= 1]
    t = draw(st.sampled_from(free))
    m.used[t] += 3
    m.melds[seat].append(("peng", t, None))
    m.pengs[seat].append(t)
    m.pengs_logged[seat] = m.any_meld = True
    i = len(m.events)
    m.expected[i] = []
    m.last = ("peng", seat, None, t, frm, i)
    m.events.append({"type": "peng", "seat": seat, "tile": tile_str(t), "from": frm})
    return True


def kept_waits(m: Model, seat):
    counts, melds = m.kept[seat]
    return [t for t in ref.waits(counts, melds, m.voids[seat]) if m.used[t] < 4]


def winner_entries(m: Model, draw, rnd, seats, tile, counted_once, allow_melds=True, flags=None):
    """Winner entries for ``seats`` (fan or a real hand holding ``tile``); updates ``used``.

    ``counted_once``: the win tile is one discard shared by every winner (counted once).
    ``tile`` None: a self-drawn win whose tile is chosen here (from the hand).
    A 血流 winner with a kept hand gives that hand plus the tile, when the tile is one of its waits.
    Under dianpao_pinghu = false a win on a discard worth 1 fan (by the reference) is never emitted.
    Returns (entries, fans-or-None per winner, concealed counts-or-None per winner, the tile)."""
    entries: list[dict] = []
    fans: list[int | None] = []
    hands: list[list[int] | None] = []
    first_hand = True
    no_one_fan = counted_once and not m.R["dianpao_pinghu"]
    for s in seats:
        use_hand = draw(st.booleans())
        c = None
        kept = m.kept[s] if m.xueliu else None
        melds = kept[1] if kept is not None else m.melds[s]
        if use_hand and kept is not None:
            if tile is None:
                waits = kept_waits(m, s)
                if waits:
                    tile = draw(st.sampled_from(waits))
            if tile is not None and tile in ref.waits(kept[0], kept[1], m.voids[s]) and (
                    m.used[tile] < 4 or (counted_once and not first_hand)):
                c = list(kept[0])
                c[tile] += 1
        elif use_hand and (allow_melds or not melds):
            a = m.avail
            if counted_once and not first_hand:
                a[tile] += 1
            c = build_win(rnd, melds, m.voids[s], a, need=tile, suits_in_play=m.suits)
            if c is not None and tile is None:
                tile = draw(st.sampled_from([x for x in range(27) if c[x]]))
        if c is not None and no_one_fan and ref_fan(c, melds, flags or {}, m.R, tile, m.voids[s]) == 1:
            c = None                               # that win cannot happen: declare a fan instead
        if c is None:
            f = draw(st.integers(2 if no_one_fan else 1, 9))
            entries.append({"seat": s, "fan": f})
            fans.append(f)
            hands.append(None)
            continue
        if kept is not None:
            m.used[tile] += 1                       # the kept hand is counted already: the tile won is new
        else:
            for x in range(27):
                m.used[x] += c[x]
        if counted_once and not first_hand:
            m.used[tile] -= 1
        first_hand = False
        entries.append({"seat": s, "hand": hand_json(c, melds)})
        fans.append(None)
        hands.append(c)
    return entries, fans, hands, tile


def gen_hu(m: Model, draw, rnd) -> bool:
    act = m.active
    i = len(m.events)
    last = m.last
    kinds = ["discard", "discard", "self"]
    if last and last[0] == "kong" and last[5] == i - 1:
        kinds += ["gangshangpao", "gangshanghua"] * 2
        if last[2] == "added":
            kinds += ["robbing"] * 6
    if i == 0:
        kinds.append("heavenly")
    if not m.any_meld and any(s != m.dealer for s in act) and not (m.xueliu and m.first_win is not None):
        kinds.append("earthly")                       # (血流: 天胡/地胡 only for the round's first win)
    kind = draw(st.sampled_from(kinds))
    flags = {}
    kong: dict | None = None  # the kong the win follows (gangshangpao, gangshanghua) or robs
    if kind in ("discard", "gangshangpao", "robbing"):
        if kind == "discard":
            frm = draw(st.sampled_from(act))
        else:
            assert last is not None  # (those kinds only right after a kong)
            frm = last[1]
            kong = m.kongs[last[5]]
        others = [s for s in act if s != frm]
        if not others:
            return False
        seats = draw(st.lists(st.sampled_from(others), min_size=1, max_size=len(others), unique=True))
        if kind == "robbing":
            assert last is not None and kong is not None
            t = last[3]
            flags["robbing_kong"] = True
            # the robbed kong counts as a peng from now on
            m.used[t] -= 1
            ks = kong["seat"]
            m.melds[ks] = [(("peng", tt, None) if (typ == "kong" and tt == t and k == "added") else (typ, tt, k))
                           for typ, tt, k in m.melds[ks]]
            if m.kept[ks] is not None:              # (so does a 血流 winner's kept hand)
                kc, km = m.kept[ks]
                m.kept[ks] = (kc, [(("peng", tt, None) if (typ == "kong" and tt == t and k == "added")
                                    else (typ, tt, k)) for typ, tt, k in km])
        else:
            cand = [x for x in m.tiles if m.used[x] < 4]
            waits = sorted({w for s in seats if m.kept[s] is not None for w in kept_waits(m, s)})
            t = draw(st.sampled_from(waits if waits and draw(st.booleans()) else cand))
            if kind == "gangshangpao":
                flags["after_kong"] = True
        if draw(st.integers(0, 5)) == 0:
            flags["last_tile"] = True
        entries, fans, _, _ = winner_entries(m, draw, rnd, seats, t, counted_once=True, flags=flags)
        if m.xueliu and all(f is not None for f in fans):
            m.used[t] += 1                      # 血流: the tile won is set aside and counts (§13.2)
    else:
        frm = None
        if kind == "gangshanghua":
            assert last is not None  # (only right after a kong)
            seat = last[1]
            kong = m.kongs[last[5]]
            flags["after_kong"] = True
        elif kind == "heavenly":
            seat = m.dealer
            flags["heavenly"] = True
        elif kind == "earthly":
            seat = draw(st.sampled_from([s for s in act if s != m.dealer]))
            flags["earthly"] = True
        else:
            seat = draw(st.sampled_from(act))
        seats = [seat]
        if kind not in ("heavenly", "earthly") and draw(st.integers(0, 5)) == 0:
            flags["last_tile"] = True
        # a self-drawn win tile comes from the hand; with a declared fan any tile in play
        entries, fans, hands, t = winner_entries(m, draw, rnd, seats, None, counted_once=False,
                                                 allow_melds=kind not in ("heavenly", "earthly"))
        if t is None:
            if m.xueliu:                        # 血流: the tile won is set aside and counts (§13.2)
                t = draw(st.sampled_from([x for x in m.tiles if m.used[x] < 4]))
                m.used[t] += 1
            else:
                t = draw(st.sampled_from(m.tiles))
    ev = {"type": "hu", "from": frm, "tile": tile_str(t), "winners": entries, **flags}

    # -- expected transfers (only when every winner declared its fan) --------------------
    R = m.R
    exp: list[Transfer] = []
    if kind == "robbing":
        assert kong is not None
        for p, pts in kong["paid"]:
            pay(exp, kong["seat"], p, pts, "kong_void")
        kong["void"] = True
    feeder = kong is not None and kind == "gangshanghua" and R["dianganghua"] == "discard" and kong["kind"] == "direct"
    for w, f in zip(seats, fans):
        pts = None if f is None else win_points(f, R)
        if frm is not None:
            if pts is not None:
                pay(exp, frm, w, pts, "dianpao")
        elif feeder:
            assert kong is not None
            if pts is not None:
                pay(exp, kong["from"], w, pts, "dianpao")
        else:
            extra = m.unit(1) if R["zimo"] == "base" else 0
            for s in act:
                if s != w and pts is not None:
                    pay(exp, s, w, pts + extra, "zimo")
    if kind == "gangshangpao":
        assert kong is not None
        collected = sum(p for _, p in kong["paid"])
        for w in seats:
            pay(exp, frm, w, collected, "transfer")
        kong["moved"] = True
    m.expected[i] = exp if all(f is not None for f in fans) else None
    if m.first_win is None:
        m.first_win = (list(seats), frm)
    for s, e in zip(seats, entries):
        m.win_event.setdefault(s, i)
        if s not in m.won:
            m.won.append(s)
            m.order.append(s)
        if m.xueliu and "hand" in e:               # 血流: the winner keeps its 13 (§13.2)
            c = ref.counts_of(e["hand"]["tiles"])
            c[t] -= 1
            m.kept[s] = (c, list(m.kept[s][1] if m.kept[s] is not None else m.melds[s]))
    if R["mode"] == "normal" or (not m.xueliu and len(m.won) >= m.n - 1):
        m.ended = True
    m.last = ("hu", seats[0], None, t, frm, i)
    m.events.append(ev)
    return True


def seat_reports(m: Model, draw, rnd, seats):
    """Random status or 13-size hand per seat; returns (entries, statuses or None if a hand was given).

    A 血流 winner listed is ting: its kept hand, a status ``ting``, or (hand unknown) a ting hand."""
    entries: list[dict] = []
    statuses: dict[int, tuple[str, int]] | None = {}  # seat -> (status, dajiao fan); None: a hand was given
    hands_too = draw(st.booleans())                   # half of the lists give statuses only
    for s in seats:
        winner = m.has_won(s)
        options = (["ting"] if winner else ["ting", "not_ting", "huazhu"]) + ["hand", "hand"] * hands_too
        choice = draw(st.sampled_from(options))
        c = None
        melds = m.melds[s]
        if choice == "hand":
            if winner and m.kept[s] is not None:
                c, melds = list(m.kept[s][0]), m.kept[s][1]
                entries.append({"seat": s, "hand": hand_json(c, melds)})   # counted already
                statuses = None
                continue
            if winner or draw(st.booleans()):
                c = build_win(rnd, melds, m.voids[s], m.avail, suits_in_play=m.suits)
                if c is not None:
                    c[rnd.choice([x for x in range(27) if c[x]])] -= 1
            else:
                c = random_13(rnd, melds, m.avail, suits_in_play=m.suits)
        if c is not None:
            for x in range(27):
                m.used[x] += c[x]
            entries.append({"seat": s, "hand": hand_json(c, melds)})
            statuses = None
            continue
        if choice == "hand":
            choice = "ting" if winner else "not_ting"
        if choice == "ting":
            f = draw(st.integers(1, 9))
            entries.append({"seat": s, "status": "ting", "dajiao_fan": f})
            if statuses is not None:
                statuses[s] = ("ting", f)
        else:
            entries.append({"seat": s, "status": choice})
            if statuses is not None:
                # §7.2: with huazhu = 0 there is no 花猪: a declared huazhu is simply not ting
                statuses[s] = ("not_ting" if choice == "huazhu" and m.R["huazhu"] == 0 else choice, 0)
    return entries, statuses


def dajiao_points_of(m: Model, s, statuses) -> int:
    """A ting seat's 大叫 points: a 血流 winner's from its kept hand when known (§13.5), else its entry's."""
    if m.has_won(s) and m.kept[s] is not None:
        counts, melds = m.kept[s]
        return ref_dajiao(counts, melds, m.voids[s], m.R)
    if s in statuses:
        return win_points(statuses[s][1], m.R)
    return 0                                        # a 血流 winner not listed, its hand unknown


def collectors(m: Model, statuses, candidates):
    """The ting seats that collect 大叫 among ``candidates``: in 血流 winners only with the option."""
    out = []
    for s in candidates:
        if m.has_won(s):
            if m.R["xueliu_dajiao_winners"]:
                out.append(s)
        elif s in statuses and statuses[s][0] == "ting":
            out.append(s)
    return out


def gen_draw(m: Model, draw, rnd) -> bool:
    act = m.active
    i = len(m.events)
    listed = [s for s in act if not m.has_won(s)] + [s for s in act if m.has_won(s) and draw(st.booleans())]
    order = draw(st.permutations(listed))
    entries, statuses = seat_reports(m, draw, rnd, order)
    R = m.R
    exp: list[Transfer] | None = None
    if statuses is not None:
        exp = []
        rest = [s for s in act if not m.has_won(s)]    # (血流 winners are ting: they refund nothing)
        for s in rest:                                  # 1. 退税
            if statuses[s][0] != "ting":
                for k in m.kongs.values():
                    if k["seat"] == s and not k["void"] and not k["moved"]:
                        for p, pts in k["paid"]:
                            if p not in m.left:
                                pay(exp, s, p, pts, "refund")
        pigs = [s for s in rest if statuses[s][0] == "huazhu"]     # 2. 查花猪
        payees = [s for s in act if s not in pigs]
        if R["huazhu_pays_winners"] and not m.xueliu:
            payees += [s for s in m.won if s not in m.left]
        for pig in pigs:
            for s in payees:
                pay(exp, pig, s, m.unit(R["huazhu"]), "huazhu")
        tings = collectors(m, statuses, act)               # 3. 查大叫
        for s in rest:
            if statuses[s][0] == "not_ting":
                for t in tings:
                    pay(exp, s, t, dajiao_points_of(m, t, statuses), "dajiao")
    m.expected[i] = exp
    m.ended = True
    m.last = ("draw", None, None, None, None, i)
    m.events.append({"type": "draw", "seats": entries})
    return True


def gen_escape(m: Model, draw, rnd, winners_only=False) -> bool:
    act = m.active
    i = len(m.events)
    winners_in = [s for s in m.won if s not in m.left] if m.R["mode"] == "xuezhan" else []
    if winners_in and (winners_only or draw(st.booleans())):
        seat = draw(st.sampled_from(winners_in))
    else:
        seat = draw(st.sampled_from(act))
    ev = {"type": "escape", "seat": seat}
    if seat in m.won and not m.xueliu:                  # a winner leaves (血战)
        m.expected[i] = "forfeit" if m.R["winner_leaves"] == "forfeit" else []
        m.left.append(seat)
        m.leave_event[seat] = i
        m.last = ("escape", seat, None, None, None, i)
        m.events.append(ev)
        return True
    others = [s for s in act if s != seat]
    last_four = draw(st.booleans())
    ev["last_four"] = last_four
    statuses = {}
    if last_four or draw(st.booleans()):
        listed = draw(st.lists(st.sampled_from(others), unique=True)) if others else []
        entries, statuses = seat_reports(m, draw, rnd, listed)
        if draw(st.booleans()):
            entries.append({"seat": seat, "status": "ting", "dajiao_fan": 9})   # the leaver's own: ignored
        ev["seats"] = entries
    exp = [(seat, s, m.unit(m.R["escape"]), "escape") for s in others if m.unit(m.R["escape"])]
    if last_four:
        if statuses is None:
            exp = None
        else:
            dj = [(seat, s, dajiao_points_of(m, s, statuses), "escape") for s in collectors(m, statuses, others)]
            if sum(x[2] for x in dj) > sum(x[2] for x in exp):
                exp = dj
    m.expected[i] = exp
    m.left.append(seat)
    m.leave_event[seat] = i
    m.ended = True
    m.last = ("escape", seat, None, None, None, i)
    m.events.append(ev)
    return True


GENERATORS = {"kong": gen_kong, "peng": gen_peng, "hu": gen_hu, "draw": gen_draw, "escape": gen_escape}


@st.composite
def rounds(draw, max_events=12, xuezhan=False, end_with_draw=False, mode=None, players=None):
    spec, R = draw(rulesets())
    if xuezhan:                                       # 血战 only: more wins, escapes of winners
        mode = "xuezhan"
        spec["winner_leaves"] = R["winner_leaves"] = draw(st.sampled_from(["forfeit", "deferred"]))
    if mode is not None:
        spec["mode"] = R["mode"] = mode
    if players is not None:
        spec["players"] = R["players"] = players
        if players == 3:
            R["huazhu"] = 0
    n_seats = R["players"]
    dealer = draw(st.integers(0, n_seats - 1))
    if n_seats == 3:
        voids = [None] * 3                            # no 定缺 with three players (§14.2)
    else:
        voids = draw(st.lists(st.none() | st.integers(0, 2), min_size=4, max_size=4))
    rnd = draw(st.randoms(use_true_random=False))
    m = Model(R, dealer, voids)
    n = max_events - draw(st.integers(0, max_events))     # shrinks towards long rounds
    weights = ["kong", "peng", "hu", "kong", "peng", "hu", "kong", "escape", "draw"]
    if m.xueliu:
        weights += ["hu", "hu", "kong"]               # repeated wins, kongs on kept hands
    tries = 0
    while len(m.events) < n and not m.ended and tries < 3 * max_events:
        tries += 1
        last = m.last
        if last and last[0] == "kong" and last[2] == "added" and draw(st.booleans()):
            kind = "hu"                               # give 抢杠胡 a chance
        elif (m.R["mode"] == "xuezhan" and any(s not in m.left for s in m.won)
              and draw(st.integers(0, 3)) == 0):
            kind = "escape"                           # give a winner the chance to leave
        else:
            kind = draw(st.sampled_from(weights))
        ending = kind in ("draw", "escape") or (
            kind == "hu" and (R["mode"] == "normal" or (not m.xueliu and len(m.won) == m.n - 2)))
        if m.won and m.R["mode"] == "xuezhan" and kind == "escape" and draw(st.booleans()):
            ending = False                            # mostly a winner leaving
        if ending and len(m.events) < n - 1 and draw(st.integers(0, 3)):
            continue   # round-ending events mostly at the end
        if end_with_draw and kind in ("draw", "escape"):
            if kind == "escape" and m.R["mode"] == "xuezhan" and any(x not in m.left for x in m.won):
                gen_escape(m, draw, rnd, winners_only=True)
            continue
        GENERATORS[kind](m, draw, rnd)
    if end_with_draw and not m.ended:
        gen_draw(m, draw, rnd)
    return spec, m


def voids_arg(m: Model):
    return [None if v is None else SUIT[v] for v in m.voids]


def run(spec, m: Model, events=None):
    return settle(m.events if events is None else events, dealer=m.dealer, ruleset=spec, voids=voids_arg(m))


def merged(transfers):
    c = Counter()
    for t in transfers:
        c[(t.payer, t.payee, t.reason)] += t.points
    return {k: v for k, v in c.items() if v}


def merged_exp(exp):
    c = Counter()
    for p, q, pts, r in exp:
        c[(p, q, r)] += pts
    return {k: v for k, v in c.items() if v}


PROPS = settings(
    max_examples=int(os.environ.get("SETTLE_PROP_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


# =========================================================================
# properties
# =========================================================================
@PROPS
@given(rounds())
def test_valid_rounds_settle_balanced(case):
    spec, m = case
    s = run(spec, m)
    n = len(m.events)
    d = [0] * m.n                                   # one per seat: three with players = 3 (§14.6)
    for t in s.transfers:
        assert t.points > 0 and t.payer != t.payee
        assert 0 <= t.payer < m.n and 0 <= t.payee < m.n
        assert t.reason in REASONS
        assert 0 <= t.event < n
        d[t.payer] -= t.points
        d[t.payee] += t.points
    assert sum(s.deltas) == 0
    assert tuple(d) == s.deltas
    # transfers are listed in event order
    assert [t.event for t in s.transfers] == sorted(t.event for t in s.transfers)
    assert list(s.winners) == m.order
    assert s.ended == m.ended


@PROPS
@given(st.one_of(rounds(), rounds(xuezhan=True), rounds(xuezhan=True, end_with_draw=True),
                 rounds(mode="xueliu"), rounds(mode="xueliu", end_with_draw=True), rounds(players=3),
                 rounds(mode="xueliu", players=3, end_with_draw=True)))
def test_model_predicted_transfers(case):
    """Kongs, declared-fan hus, escapes, status-only draws and forfeits match docs/rules.md (§13 and §14 too)."""
    spec, m = case
    s = run(spec, m)
    by_event: dict = {}
    for t in s.transfers:
        by_event.setdefault(t.event, []).append(t)
    left_before: list = []
    for i, ev in enumerate(m.events):
        exp = m.expected.get(i)
        got = merged(by_event.get(i, []))
        if exp == "forfeit":
            seat = ev["seat"]
            void_kongs = {k for k, v in m.kongs.items() if v["void"]}
            earlier = [t for t in s.transfers if t.event < i and t.payee == seat]
            if any(t.event in void_kongs and t.reason.startswith("kong_") and t.reason != "kong_void"
                   for t in earlier):
                pass   # the disputed reading (see test_settle.py::test_forfeit_voided_kong_income)
            else:
                want = Counter()
                for t in earlier:
                    if t.reason != "kong_void" and t.payer not in left_before:
                        want[(seat, t.payer, "forfeit")] += t.points
                assert got == {k: v for k, v in want.items() if v}, (i, ev)
        elif exp is not None:
            assert got == merged_exp(exp), (i, ev)
        if ev["type"] == "escape":
            left_before.append(ev["seat"])
    # next dealer (§10)
    if not m.ended:
        assert s.next_dealer is None
    elif m.first_win is None:
        assert s.next_dealer == m.dealer
    else:
        seats, frm = m.first_win
        if m.R["next_dealer"] == "winner":
            assert s.next_dealer == (seats[0] if len(seats) == 1 else frm)
        else:
            assert s.next_dealer == (seats[0] if frm is None else frm)


@PROPS
@given(rounds(xuezhan=True))
def test_winner_never_pays_or_collects_after_winning(case):
    spec, m = case
    s = run(spec, m)
    for t in s.transfers:
        for seat in (t.payer, t.payee):
            w = m.win_event.get(seat)
            if w is not None and t.event > w:
                ok = (seat == t.payee and t.reason in ("huazhu", "refund")) or t.reason == "forfeit"
                assert ok, (seat, t)
            lv = m.leave_event.get(seat)
            if lv is not None:
                assert t.event <= lv, (seat, t)          # nothing at all after leaving
                if t.event == lv and seat in m.win_event:
                    assert t.reason == "forfeit" and t.payer == seat


@PROPS
@given(rounds())
def test_replay_is_deterministic(case):
    spec, m = case
    a = run(spec, m)
    b = run(spec, m, json.loads(json.dumps(m.events)))
    assert a == b
    assert a.as_dict() == b.as_dict()


@PROPS
@given(rounds())
def test_removing_trailing_events_keeps_earlier_transfers(case):
    spec, m = case
    full = run(spec, m)
    for k in range(len(m.events)):
        part = run(spec, m, m.events[:k])
        assert part.transfers == tuple(t for t in full.transfers if t.event < k)
        assert list(part.winners) == [w for w in full.winners if m.win_event[w] < k]


@PROPS
@given(rounds(), st.data())
def test_round_trip_mid_sequence(case, data):
    spec, m = case
    full = run(spec, m)
    cut = data.draw(st.integers(0, len(m.events)))
    r = Round(spec, m.dealer, voids_arg(m))
    for ev in m.events[:cut]:
        r.step(ev)
    blob = json.dumps(r.to_dict())
    r2 = Round.from_dict(json.loads(blob))
    assert json.dumps(r2.to_dict(), sort_keys=True) == json.dumps(json.loads(blob), sort_keys=True)
    for ev in m.events[cut:]:
        r2.step(ev)
    assert r2.settlement() == full
    # and stepping with apply (functional) gives the same
    r3 = Round(spec, m.dealer, voids_arg(m))
    for ev in m.events:
        r3, _ = r3.apply(ev)
    assert r3.settlement() == full


def counted_copies(r: Round) -> list[int]:
    """§6's count of each tile, summed here from the round's parts: the concealed tiles of the hands
    given, and per seat its logged melds, or else (none logged) the melds of its last hand."""
    return [r.concealed[t] + sum(r.melds[s][t] if r.logged[s] else r.hand_melds[s][t] for s in r.seats)
            for t in range(27)]


@PROPS
@given(rounds(), st.data())
def test_kept_copy_counts_are_the_sum_of_the_round(case, data):
    """Round.copies (kept as events are applied, for the 4-copy check) is the sum of the round's parts
    after every event, also after an invalid one has half-changed the state, and after from_dict; in a
    valid round no count is over 4."""
    spec, m = case
    r = Round(spec, m.dealer, voids_arg(m))
    for ev in m.events:
        r.step(ev)
        assert r.copies == counted_copies(r) and max(r.copies) <= 4 and min(r.concealed) >= 0
    if not r.ended:
        bad = data.draw(st.sampled_from(invalid_events(r)))
        try:
            r.step(bad)
        except EventError:
            pass
        assert r.copies == counted_copies(r)
    assert Round.from_dict(json.loads(json.dumps(r.to_dict()))).copies == counted_copies(r)


def invalid_events(m_state: Round):
    """Events that cannot happen in any state (or fail only after mutating the state)."""
    act = m_state.active
    out = [
        {"type": "kong", "seat": 4, "kind": "concealed", "tile": "1m"},
        {"type": "hu", "from": 1, "tile": "1m", "winners": [{"seat": 1, "fan": 2}]},
        {"type": "nope"},
    ]
    if m_state.ended or any(s not in m_state.won for s in act):   # (a 血流 draw need not list winners)
        out.append({"type": "draw", "seats": []})
    out += [
        {"type": "hu", "from": None, "tile": "1m", "winners": [{"seat": 0, "hand": {"tiles": "1234567m1234567p"}}]},
        {"type": "hu", "from": None, "tile": "1m", "winners": [{"seat": 0, "hand": {"tiles": "1234567m1234567p"}}]},
        # five copies of 1m across one seat's peng and another's concealed kong
        {"type": "peng", "seat": 0, "tile": "1m", "from": 1},
    ]
    # a draw whose hands together hold eight 1m: fails after the hands were recorded
    out.append({"type": "draw", "seats": [{"seat": s, "hand": {"tiles": "1111222233334m"}} for s in act]})
    if len(act) >= 3:
        # two winners, each valid alone, together holding eight 1m
        out.append({"type": "hu", "from": act[0], "tile": "2m", "winners": [
            {"seat": s, "hand": {"tiles": "111123m456m789m99p"}} for s in act[1:3]]})
    return out


@PROPS
@given(rounds(), st.data())
def test_apply_leaves_original_unchanged(case, data):
    spec, m = case
    cut = data.draw(st.integers(0, len(m.events)))
    r = Round(spec, m.dealer, voids_arg(m))
    for ev in m.events[:cut]:
        r.step(ev)
    before = json.dumps(r.to_dict(), sort_keys=True)
    bad = invalid_events(r)
    ev = data.draw(st.sampled_from(bad))
    if ev["type"] == "peng":
        # make it certainly a fifth copy: first a concealed kong of 1m (1p with three players: no 万)
        # when none is out yet, by a seat whose hand is not kept (血流), then a peng by a seat that may claim
        t, name = (9, "1p") if len(r.seats) == 3 else (0, "1m")
        free = (r.concealed[t] == 0 and all(r.melds[x][t] == 0 and r.hand_melds[x][t] == 0 for x in r.seats))
        kongers = [s for s in r.active if r.kept[s] is None]
        claimers = [s for s in r.active if not (r.xueliu and s in r.won)]
        pairs = [(a, b) for a in kongers for b in claimers if a != b]
        if free and pairs and not r.ended:
            a, b = pairs[0]
            r, _ = r.apply({"type": "kong", "seat": a, "kind": "concealed", "tile": name})
            before = json.dumps(r.to_dict(), sort_keys=True)
            ev = {"type": "peng", "seat": b, "tile": name, "from": a}
        else:
            ev = {"type": "nope"}
    with pytest.raises(EventError) as info:
        r.apply(ev)
    assert info.value.event == r.n
    assert json.dumps(r.to_dict(), sort_keys=True) == before
    # the untouched round still accepts the rest of the events
    if ev["type"] != "peng":
        for e in m.events[cut:]:
            r.step(e)
        assert r.settlement() == run(spec, m)


# =========================================================================
# 血流成河 and three players (docs/rules.md#s13, §14)
# =========================================================================
@PROPS
@given(st.one_of(rounds(mode="xueliu"), rounds(mode="xueliu", players=3)), st.data())
def test_xueliu_repeated_wins_count_each_tile_won_once(case, data):
    """A 血流 seat's kept hand counts once, each set-aside winning tile once: wins on one wait go on
    until the fourth copy, and the next is refused as a fifth (§6, §13.2)."""
    spec, m = case
    if m.ended:
        return
    seats = [s for s in m.active if m.kept[s] is not None]
    r = Round(spec, m.dealer, voids_arg(m))
    for ev in m.events:
        r.step(ev)
    if not seats:
        return
    seat = data.draw(st.sampled_from(seats))
    counts, melds = m.kept[seat]
    waits = ref.waits(counts, melds, m.voids[seat])
    t = data.draw(st.sampled_from(waits))
    c = list(counts)
    c[t] += 1
    entry = {"seat": seat, "hand": hand_json(c, melds)}
    for _ in range(4 - m.used[t]):
        r.step({"type": "hu", "from": None, "tile": tile_str(t), "winners": [entry]})
    with pytest.raises(EventError) as info:
        r.apply({"type": "hu", "from": None, "tile": tile_str(t), "winners": [entry]})
    assert info.value.code == "too_many_copies"
    assert sum(r.deltas) == 0


@PROPS
@given(st.one_of(rounds(), rounds(mode="xueliu"), rounds(players=3), rounds(mode="xueliu", players=3)),
       st.lists(st.integers(0, 2), max_size=2))
def test_table_balances_are_the_fold_of_its_log(case, more):
    """A table over several rounds: balances sum to zero, equal the sum of each round's settlement,
    and the incremental state equals the fold of the whole log (§10, §14.6)."""
    spec, m = case
    names = ["东", "南", "西", "北"][: m.n]
    state = TableState.new(names, spec, dealer=m.dealer)
    log, seq = [], 0
    want = [0] * m.n
    for _ in range(1 + len(more)):
        start = {"type": "round_start", "dealer": m.dealer, "voids": voids_arg(m)}
        body = [start] + m.events + ([] if m.ended else [{"type": "round_end"}])
        for rec in body:
            seq += 1
            state, _ = state.apply(rec, seq)
            log.append({"seq": seq, **rec})
        want = [a + b for a, b in zip(want, run(spec, m).deltas)]
    assert state.balances == want and len(state.balances) == m.n and sum(state.balances) == 0
    folded, summaries = fold(names, spec, m.dealer, log)
    assert folded.to_dict() == state.to_dict()
    assert len(summaries) == 1 + len(more)
