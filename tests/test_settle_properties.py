"""Property tests for round settlement (RULES.md §6-§8, §10) over random VALID rounds.

The generator below keeps its own model of a round (who is still in, logged pengs
and kongs, every copy of every tile the round has shown, the kong income and who
paid it) and only emits events that can happen: kongs with payments, pengs then
added kongs, hus with a declared fan or with a real winning hand (random sets and a
pair in at most two suits, the seat's logged melds included), 杠上炮/杠上花/抢杠胡
right after the right kong, 天胡/地胡 when allowed, draws with random statuses or
13-tile hands, escapes (also by winners in 血战), under random rulesets (a preset
plus random overrides).

Besides the structural properties asked for (zero sum, deltas = fold of the
transfers, winners never pay/collect after winning, determinism, prefix stability,
to_dict/from_dict round-trip, ``Round.apply`` leaving the original alone on error),
the model also predicts, from RULES.md alone, the exact transfers of every kong, of
every hu whose winners declare their fan, of every escape, of every draw whose
seats declare statuses, and of every forfeit; those predictions are compared with
the engine's output.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from service.rules.errors import EventError
from service.rules.settle import Round, settle

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


# -- the rule sets (RULES.md §9, typed in from the rule book) ---------------------------
PRESETS = {
    "xuezhan": dict(mode="xuezhan", fan_table="qq", scoring="exponential", base=6, cap=None, zimo="none",
                    direct_kong=1, added_kong=1, concealed_kong=2, dianganghua="self_draw", huazhu=16,
                    huazhu_pays_winners=True, dajiao="max", escape=16, winner_leaves="deferred",
                    next_dealer="winner"),
}
PRESETS["normal"] = dict(PRESETS["xuezhan"], mode="normal", next_dealer="discarder")
PRESETS["chengdu-points"] = dict(PRESETS["xuezhan"], mode="normal", fan_table="chengdu", scoring="linear",
                                 base=1, direct_kong=0, added_kong=0, concealed_kong=0,
                                 dianganghua="discard", huazhu=0, dajiao="min")

OVERRIDES = {
    "mode": st.sampled_from(["xuezhan", "normal"]),
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
    "haidi": st.booleans(),
    "jingoudiao": st.booleans(),
    "menqing": st.booleans(),
    "zhongzhang": st.booleans(),
}


@st.composite
def rulesets(draw):
    preset = draw(st.sampled_from(sorted(PRESETS)))
    names = draw(st.lists(st.sampled_from(sorted(OVERRIDES)), unique=True, max_size=8))
    over = {n: draw(OVERRIDES[n]) for n in sorted(names)}
    spec = {"preset": preset, **over}
    resolved = dict(PRESETS[preset], haidi=False, jingoudiao=False, menqing=False, zhongzhang=False)
    resolved.update(over)
    return spec, resolved


def win_points(fan: int, R: dict) -> int:
    """§5.3: fan clipped to the cap, then base × 2^(fan-1) or base × fan."""
    if R["cap"] is not None:
        fan = min(fan, R["cap"])
    return R["base"] * (2 ** (fan - 1) if R["scoring"] == "exponential" else fan)


# -- hand building ------------------------------------------------------------------------
def build_win(rnd: random.Random, melds, void, avail, need=None):
    """Concealed counts of a winning 14-size hand (with ``melds``) using at most ``avail``
    copies, two suits at most, none of the void suit, holding ``need``; or None."""
    if len(melds) > 4:
        return None
    msuits = {t // 9 for _, t, _ in melds}
    if void is not None and void in msuits:
        return None
    if len(msuits) > 2:
        return None
    allowed = [s for s in range(3) if s != void]
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
    suits = sorted(suits)
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
                    s = rnd.choice(suits)
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


def random_13(rnd: random.Random, melds, avail):
    """Any 13-size hand: the melds plus random concealed tiles that are still available."""
    n = 13 - 3 * len(melds)
    if n < 1:
        return None
    suits = rnd.sample(range(3), rnd.choice([1, 2, 2, 3]))
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
    won: list = field(default_factory=list)
    left: list = field(default_factory=list)
    melds: list = field(default_factory=lambda: [[] for _ in range(4)])   # (type, tile, kind)
    pengs: list = field(default_factory=lambda: [[] for _ in range(4)])   # addable pengs
    pengs_logged: list = field(default_factory=lambda: [False] * 4)
    any_meld: bool = False
    ended: bool = False
    events: list = field(default_factory=list)
    last: tuple | None = None             # ("kong", seat, kind, tile, from, index) etc.
    kongs: dict = field(default_factory=dict)   # index -> dict(seat, kind, paid[(payer, pts)], void, moved)
    expected: dict = field(default_factory=dict)  # event index -> list of (payer, payee, pts, reason) or None
    win_event: dict = field(default_factory=dict)
    leave_event: dict = field(default_factory=dict)
    first_win: tuple | None = None
    order: list = field(default_factory=list)      # winners in order

    @property
    def active(self):
        return [s for s in range(4) if s not in self.won and s not in self.left]

    @property
    def avail(self):
        return [4 - u for u in self.used]

    def unit(self, n):
        return n * self.R["base"]


def pay(out, payer, payee, pts, reason):
    if pts and payer != payee:
        out.append((payer, payee, pts, reason))


def gen_kong(m: Model, draw, rnd) -> bool:
    act = m.active
    seat = draw(st.sampled_from(act))
    others = [s for s in act if s != seat]
    kind = draw(st.sampled_from(["concealed", "added", "direct"]))
    i = len(m.events)
    exp = []
    if kind == "added":
        choices = [t for t in m.pengs[seat] if m.used[t] == 3]
        if choices and draw(st.booleans()):
            t = draw(st.sampled_from(choices))
            m.pengs[seat].remove(t)
            m.melds[seat] = [(("kong", t, "added") if (typ == "peng" and tt == t) else (typ, tt, k))
                             for typ, tt, k in m.melds[seat]]
            m.used[t] += 1
        elif not m.pengs_logged[seat]:
            free = [t for t in range(27) if m.used[t] == 0]
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
        free = [t for t in range(27) if m.used[t] == 0]
        if not free or not others:
            return False
        t = draw(st.sampled_from(free))
        m.used[t] += 4
        m.melds[seat].append(("kong", t, kind))
        if kind == "direct":
            if not others:
                return False
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
    if len(act) < 2:
        return False
    seat = draw(st.sampled_from(act))
    frm = draw(st.sampled_from([s for s in act if s != seat]))
    free = [t for t in range(27) if m.used[t] <= 1]
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


def winner_entries(m: Model, draw, rnd, seats, tile, counted_once, allow_melds=True):
    """Winner entries for ``seats`` (fan or a real hand holding ``tile``); updates ``used``.

    ``counted_once``: the win tile is one discard shared by every winner (counted once).
    Returns (entries, fans-or-None per winner, concealed counts-or-None per winner)."""
    entries, fans, hands = [], [], []
    first_hand = True
    for s in seats:
        use_hand = draw(st.booleans())
        c = None
        if use_hand and (allow_melds or not m.melds[s]):
            a = m.avail
            if counted_once and not first_hand:
                a[tile] += 1
            c = build_win(rnd, m.melds[s], m.voids[s], a, need=tile)
        if c is None:
            f = draw(st.integers(1, 9))
            entries.append({"seat": s, "fan": f})
            fans.append(f)
            hands.append(None)
            continue
        for x in range(27):
            m.used[x] += c[x]
        if counted_once and not first_hand:
            m.used[tile] -= 1
        first_hand = False
        entries.append({"seat": s, "hand": hand_json(c, m.melds[s])})
        fans.append(None)
        hands.append(c)
    return entries, fans, hands


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
    if not m.any_meld and any(s != m.dealer for s in act):
        kinds.append("earthly")
    kind = draw(st.sampled_from(kinds))
    flags = {}
    kong = None
    if kind in ("discard", "gangshangpao", "robbing"):
        if kind == "discard":
            frm = draw(st.sampled_from(act))
        else:
            frm = last[1]
            kong = m.kongs[last[5]]
        others = [s for s in act if s != frm]
        if not others:
            return False
        seats = draw(st.lists(st.sampled_from(others), min_size=1, max_size=len(others), unique=True))
        if kind == "robbing":
            t = last[3]
            flags["robbing_kong"] = True
            # the robbed kong counts as a peng from now on
            m.used[t] -= 1
            ks = kong["seat"]
            m.melds[ks] = [(("peng", tt, None) if (typ == "kong" and tt == t and k == "added") else (typ, tt, k))
                           for typ, tt, k in m.melds[ks]]
        else:
            cand = [x for x in range(27) if m.used[x] < 4]
            t = draw(st.sampled_from(cand))
            if kind == "gangshangpao":
                flags["after_kong"] = True
        entries, fans, _ = winner_entries(m, draw, rnd, seats, t, counted_once=True)
    else:
        frm = None
        if kind == "gangshanghua":
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
        # a self-drawn win tile comes from the hand; with a declared fan any tile
        entries, fans, hands = winner_entries(m, draw, rnd, seats, None, counted_once=False,
                                              allow_melds=kind not in ("heavenly", "earthly"))
        if fans[0] is None:
            t = draw(st.sampled_from([x for x in range(27) if hands[0][x]]))
        else:
            t = draw(st.integers(0, 26))
    if kind not in ("heavenly", "earthly") and draw(st.integers(0, 5)) == 0:
        flags["last_tile"] = True
    ev = {"type": "hu", "from": frm, "tile": tile_str(t), "winners": entries, **flags}

    # -- expected transfers (only when every winner declared its fan) --------------------
    R = m.R
    exp = []
    if kind == "robbing":
        for p, pts in kong["paid"]:
            pay(exp, kong["seat"], p, pts, "kong_void")
        kong["void"] = True
    feeder = kind == "gangshanghua" and R["dianganghua"] == "discard" and kong["kind"] == "direct"
    for w, f in zip(seats, fans):
        pts = None if f is None else win_points(f, R)
        if frm is not None:
            if pts is not None:
                pay(exp, frm, w, pts, "dianpao")
        elif feeder:
            if pts is not None:
                pay(exp, kong["from"], w, pts, "dianpao")
        else:
            extra = m.unit(1) if R["zimo"] == "base" else 0
            for s in act:
                if s != w and pts is not None:
                    pay(exp, s, w, pts + extra, "zimo")
    if kind == "gangshangpao":
        collected = sum(p for _, p in kong["paid"])
        for w in seats:
            pay(exp, frm, w, collected, "transfer")
        kong["moved"] = True
    m.expected[i] = exp if all(f is not None for f in fans) else None
    if m.first_win is None:
        m.first_win = (list(seats), frm)
    for s in seats:
        m.win_event[s] = i
    m.won.extend(seats)
    m.order.extend(seats)
    if R["mode"] == "normal" or len(m.won) >= 3:
        m.ended = True
    m.last = ("hu", seats[0], None, t, frm, i)
    m.events.append(ev)
    return True


def seat_reports(m: Model, draw, rnd, seats):
    """Random status or 13-size hand per seat; returns (entries, statuses or None if a hand was given)."""
    entries, statuses = [], {}
    hands_too = draw(st.booleans())                   # half of the lists give statuses only
    for s in seats:
        choice = draw(st.sampled_from(["ting", "not_ting", "huazhu"] + ["hand", "hand"] * hands_too))
        c = None
        if choice == "hand":
            if draw(st.booleans()):
                c = build_win(rnd, m.melds[s], m.voids[s], m.avail)
                if c is not None:
                    c[rnd.choice([x for x in range(27) if c[x]])] -= 1
            else:
                c = random_13(rnd, m.melds[s], m.avail)
        if c is not None:
            for x in range(27):
                m.used[x] += c[x]
            entries.append({"seat": s, "hand": hand_json(c, m.melds[s])})
            statuses = None
            continue
        if choice == "hand":
            choice = "not_ting"
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


def gen_draw(m: Model, draw, rnd) -> bool:
    act = m.active
    i = len(m.events)
    order = draw(st.permutations(act))
    entries, statuses = seat_reports(m, draw, rnd, order)
    R = m.R
    exp = None
    if statuses is not None:
        exp = []
        for s in act:                                   # 1. 退税
            if statuses[s][0] != "ting":
                for k in m.kongs.values():
                    if k["seat"] == s and not k["void"] and not k["moved"]:
                        for p, pts in k["paid"]:
                            if p not in m.left:
                                pay(exp, s, p, pts, "refund")
        pigs = [s for s in act if statuses[s][0] == "huazhu"]     # 2. 查花猪
        payees = [s for s in act if statuses[s][0] != "huazhu"]
        if R["huazhu_pays_winners"]:
            payees += [s for s in m.won if s not in m.left]
        for pig in pigs:
            for s in payees:
                pay(exp, pig, s, m.unit(R["huazhu"]), "huazhu")
        tings = [s for s in act if statuses[s][0] == "ting"]      # 3. 查大叫
        for s in act:
            if statuses[s][0] == "not_ting":
                for t in tings:
                    pay(exp, s, t, win_points(statuses[t][1], R), "dajiao")
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
    if seat in m.won:                                   # a winner leaves (血战)
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
            dj = [(seat, s, win_points(f, m.R), "escape") for s, (stt, f) in statuses.items() if stt == "ting"]
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
def rounds(draw, max_events=12, xuezhan=False, end_with_draw=False):
    spec, R = draw(rulesets())
    if xuezhan:                                       # 血战 only: more wins, escapes of winners
        spec["mode"] = R["mode"] = "xuezhan"
        spec["winner_leaves"] = R["winner_leaves"] = draw(st.sampled_from(["forfeit", "deferred"]))
    dealer = draw(st.integers(0, 3))
    voids = draw(st.lists(st.none() | st.integers(0, 2), min_size=4, max_size=4))
    rnd = draw(st.randoms(use_true_random=False))
    m = Model(R, dealer, voids)
    n = max_events - draw(st.integers(0, max_events))     # shrinks towards long rounds
    weights = ["kong", "peng", "hu", "kong", "peng", "hu", "kong", "escape", "draw"]
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
        ending = kind in ("draw", "escape") or (kind == "hu" and (R["mode"] == "normal" or len(m.won) == 2))
        if m.won and m.R["mode"] == "xuezhan" and kind == "escape" and draw(st.booleans()):
            ending = False                            # mostly a winner leaving
        if ending and len(m.events) < n - 1 and draw(st.integers(0, 3)):
            continue   # round-ending events mostly at the end
        if end_with_draw and kind in ("draw", "escape"):
            if kind == "escape" and any(x not in m.left for x in m.won):
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


PROPS = settings(max_examples=int(os.environ.get("SETTLE_PROP_EXAMPLES", "200")), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.filter_too_much,
                                                                          HealthCheck.data_too_large])


# =========================================================================
# properties
# =========================================================================
@PROPS
@given(rounds())
def test_valid_rounds_settle_balanced(case):
    spec, m = case
    s = run(spec, m)
    n = len(m.events)
    d = [0, 0, 0, 0]
    for t in s.transfers:
        assert t.points > 0 and t.payer != t.payee
        assert 0 <= t.payer <= 3 and 0 <= t.payee <= 3
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
@given(st.one_of(rounds(), rounds(xuezhan=True), rounds(xuezhan=True, end_with_draw=True)))
def test_model_predicted_transfers(case):
    """Kongs, declared-fan hus, escapes, status-only draws and forfeits match RULES.md."""
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


def invalid_events(m_state: Round):
    """Events that cannot happen in any state (or fail only after mutating the state)."""
    act = m_state.active
    out = [
        {"type": "kong", "seat": 4, "kind": "concealed", "tile": "1m"},
        {"type": "hu", "from": 1, "tile": "1m", "winners": [{"seat": 1, "fan": 2}]},
        {"type": "nope"},
        {"type": "draw", "seats": []},
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
        # make it certainly a fifth copy: first a concealed kong of 1m (when no 1m is out yet)
        free = (r.concealed[0] == 0 and all(r.melds[x][0] == 0 and r.hand_melds[x][0] == 0 for x in range(4)))
        if free and len(r.active) >= 2 and not r.ended:
            a, b = r.active[:2]
            r, _ = r.apply({"type": "kong", "seat": a, "kind": "concealed", "tile": "1m"})
            before = json.dumps(r.to_dict(), sort_keys=True)
            ev = {"type": "peng", "seat": b, "tile": "1m", "from": a}
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
