"""Clubs on real Redis (docs/api.md, docs/rules.md#s17): standings equal a fold computed independently from
the finished tables' summaries (random evenings, merges and guests); a finish retried, raced or cut off
before its count counts the table once; imports all or nothing; the problems; API keys and webhooks."""

from __future__ import annotations

import csv
import io
import threading

import orjson
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openskill.models import PlackettLuce

from service.api import create_app
from service.config import NO_LIMITS
from service.spreadsheets import rounds_csv, table_rounds_csv
from service.store import keys
from service.store.clubs import ClubStore
from service.store.table_store import Access, TableStore
from tests.problems import problem

ACME = "acme-" + "a" * 40
BETA = "beta-" + "b" * 40


def make_app(url: str, **config):
    return create_app({"TESTING": True, "REDIS_URL": url, **{var: 0 for var in NO_LIMITS}, **config})


@pytest.fixture
def client(redis_url):
    return make_app(redis_url).test_client()


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def new_club(client, **body) -> dict:
    r = client.post("/v1/clubs", json={"name": "周五麻将", **body})
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()


def add(client, club: dict, name: str) -> str:
    r = client.post(f"/v1/clubs/{club['id']}/players", json={"name": name}, headers=bearer(club["token"]))
    assert r.status_code == 201, r.get_data(as_text=True)
    return r.get_json()["id"]


def play(client, club: dict, seats: list[dict], rounds: list[list[dict]], finish: bool = True, **body) -> dict:
    r = client.post(f"/v1/clubs/{club['id']}/tables", json={"players": seats, **body}, headers=bearer(club["token"]))
    assert r.status_code == 201, r.get_data(as_text=True)
    table = r.get_json()
    for events in rounds:
        for event in [{"type": "round_start"}, *events, {"type": "round_end"}]:
            r = client.post(f"/v1/tables/{table['id']}/events", json=event, headers=bearer(table["token"]))
            assert r.status_code == 201, (event, r.get_data(as_text=True))
    if finish:
        r = client.post(f"/v1/tables/{table['id']}/finish", headers=bearer(table["token"]))
        assert r.status_code == 200, r.get_data(as_text=True)
    return table


ZIMO = [{"type": "hu", "tile": "5p", "winners": [{"seat": 0, "fan": 2}]}]


def standings(client, club: dict, season: str = "current", **query) -> dict:
    r = client.get(f"/v1/clubs/{club['id']}/seasons/{season}/standings", query_string=query,
                   headers=bearer(club["read_token"]))
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()


def row_of(body: dict, pid: str) -> dict:
    return next(r for r in body["players"] if r["player"] == pid)


# -- the property: standings = an independent fold of the finished tables' summaries -------------------
def independent(summaries: list[tuple[dict, list[str | None]]]) -> dict[str, dict]:
    """Per player, from the tables' own summaries (in the order they were finished): sums of the per-seat
    figures, the biggest win, and the rating from openskill run directly on the seats' ranks."""
    model = PlackettLuce()
    rating: dict = {}
    out: dict[str, dict] = {}
    for summary, players in summaries:
        teams = [[rating[p]] if p in rating else [model.rating()] for p in players]
        rated = model.rate(teams, ranks=[s["rank"] for s in summary["seats"]])
        for p, seat, team in zip(players, summary["seats"], rated):
            if p is None:
                continue
            rating[p] = team[0]
            f = out.setdefault(p, {k: 0 for k in ("evenings", "rounds", "total", "wins", "zimo", "dianpao_paid",
                                                  "huazhu_paid", "dajiao_paid")} | {"kongs": {"direct": 0, "added": 0,
                                                                                               "concealed": 0},
                                                                                     "biggest_win": None})
            f["evenings"] += 1
            f["rounds"] += summary["rounds"]
            for k in ("total", "wins", "zimo", "dianpao_paid", "huazhu_paid", "dajiao_paid"):
                f[k] += seat[k]
            for k in f["kongs"]:
                f["kongs"][k] += seat["kongs"][k]
            best, win = f["biggest_win"], seat["biggest_win"]
            if win and (best is None or (win["points"], win["fan"]) > (best["points"], best["fan"])):
                f["biggest_win"] = {"table": summary["id"], **win}
    for p, f in out.items():
        f["rating"] = (rating[p].mu, rating[p].sigma)
    return out


def a_round(draw) -> list[dict]:
    events = []
    if draw(st.booleans()):
        events.append({"type": "kong", "seat": draw(st.integers(0, 3)), "kind": "concealed", "tile": "7s"})
    winner = draw(st.integers(0, 3))
    fan = draw(st.integers(1, 3))
    if draw(st.booleans()):
        events.append({"type": "hu", "tile": "5p", "winners": [{"seat": winner, "fan": fan}]})
    else:
        events.append({"type": "hu", "from": (winner + draw(st.integers(1, 3))) % 4, "tile": "5p",
                       "winners": [{"seat": winner, "fan": fan}]})
    return events


@st.composite
def evenings(draw):
    """Steps: ("table", seats as pool indexes or None for a guest, rounds) or ("merge", i, j)."""
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 4)) == 0:
            steps.append(("merge", draw(st.integers(0, 5)), draw(st.integers(0, 5))))
            continue
        players = draw(st.lists(st.integers(0, 5), min_size=2, max_size=4, unique=True))
        seats = draw(st.permutations(players + [None] * (4 - len(players))))
        steps.append(("table", seats, [a_round(draw) for _ in range(draw(st.integers(0, 2)))]))
    return steps


@given(steps=evenings(), min_rounds=st.integers(0, 3))
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_standings_are_a_fold_of_the_finished_tables_summaries(client, redis_client, steps, min_rounds):
    redis_client.flushall()
    club = new_club(client, min_rounds=min_rounds)
    pool = [add(client, club, name) for name in ("老王", "小李", "阿珍", "大刘", "Ann", "Bob")]
    into = {p: p for p in pool}  # who each player is now (merges)
    finished: list[tuple[str, list[int | None]]] = []

    def now(p):
        while into[p] != p:
            p = into[p]
        return p

    for step in steps:
        if step[0] == "merge":
            a, b = pool[step[1]], pool[step[2]]
            r = client.post(f"/v1/clubs/{club['id']}/players/{a}/merge", json={"into": b},
                            headers=bearer(club["token"]))
            met = any({now(a), now(b)} <= {now(pool[i]) for i in seats if i is not None} for _, seats in finished)
            if now(a) == now(b):
                problem(r, 422, "merge_into_itself")
            elif met:
                problem(r, 422, "players_met")
            else:
                assert r.status_code == 200, r.get_data(as_text=True)
                into[now(a)] = now(b)
            continue
        _, seats, rounds = step
        names = [now(pool[i]) if i is not None else None for i in seats]
        if len({n for n in names if n}) < len([n for n in names if n]):  # two seats are one player now
            continue
        body = [{"player": pool[i]} if i is not None else {"guest": f"客{k}"} for k, i in enumerate(seats)]
        table = play(client, club, body, rounds)
        finished.append((table["id"], seats))
    summaries = []
    for table_id, seats in finished:
        summaries.append((client.application.extensions["tables"].summary(table_id),
                          [now(pool[i]) if i is not None else None for i in seats]))
    want = independent(summaries)
    got = standings(client, club)
    assert sorted(r["player"] for r in got["players"]) == sorted(want)
    for row in got["players"]:
        f = want[row["player"]]
        for k in ("evenings", "rounds", "total", "wins", "zimo", "dianpao_paid", "huazhu_paid", "dajiao_paid",
                  "kongs", "biggest_win"):
            assert row[k] == f[k], (k, row, f)
        assert (row["rating"]["mu"], row["rating"]["sigma"]) == pytest.approx(f["rating"], rel=1e-12)
        assert row["ranked"] == (f["rounds"] >= min_rounds)
    ranked = [r for r in got["players"] if r["ranked"]]
    assert got["players"][:len(ranked)] == ranked
    assert [r["total"] for r in ranked] == sorted((r["total"] for r in ranked), reverse=True)
    for pid in {now(p) for p in pool}:
        page = client.get(f"/v1/clubs/{club['id']}/players/{pid}", headers=bearer(club["read_token"])).get_json()
        mine = [(s["id"], s["seats"][[n for n in players].index(pid)]) for s, players in summaries if pid in players]
        assert [(h["table"], h["total"], h["rank"]) for h in page["history"]] == \
            [(t, seat["total"], seat["rank"]) for t, seat in mine]
        assert page["lifetime"]["evenings"] == len(mine)


# -- exactly once ------------------------------------------------------------------------------------
@pytest.fixture
def evening(client):
    club = new_club(client)
    players = [add(client, club, n) for n in ("老王", "小李", "阿珍")]
    table = play(client, club, [{"player": p} for p in players] + [{"guest": "客人"}], [ZIMO, ZIMO], finish=False)
    return club, players, table


def counted(redis_client, club: dict, table_id: str, players: list[str]) -> tuple:
    """How often the table counts: results kept, history entries, evenings in the standings."""
    results = redis_client.hlen(keys.club_results(club["id"]))
    history = sum(1 for p in players for e in redis_client.lrange(keys.club_history(club["id"], p), 0, -1)
                  if orjson.loads(e)["table"] == table_id)
    evenings = {orjson.loads(v)["evenings"] for v in redis_client.hvals(keys.club_standings(club["id"], "s1"))}
    return results, history, evenings


def test_a_retried_finish_counts_the_table_once(client, redis_client, evening):
    club, players, table = evening
    for _ in range(3):
        assert client.post(f"/v1/tables/{table['id']}/finish", headers=bearer(table["token"])).status_code == 200
    assert counted(redis_client, club, table["id"], players) == (1, 3, {1})
    assert row_of(standings(client, club), players[0])["total"] == 72


def test_raced_finishes_count_the_table_once(redis_url, redis_client, evening):
    club, players, table = evening
    apps = [make_app(redis_url) for _ in range(4)]  # four workers, each with its own connections
    barrier = threading.Barrier(len(apps))
    statuses = []

    def finish(app):
        c = app.test_client()
        barrier.wait()
        statuses.append(c.post(f"/v1/tables/{table['id']}/finish", headers=bearer(table["token"])).status_code)

    threads = [threading.Thread(target=finish, args=(a,)) for a in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 4
    assert counted(redis_client, club, table["id"], players) == (1, 3, {1})


def test_raced_counts_of_one_table_write_it_once(redis_url, redis_client, evening):
    club, players, table = evening
    TableStore(redis_client).finish(table["id"])  # (the finish only: the count is raced below)
    stores = [ClubStore(c, TableStore(c)) for c in (redis.Redis.from_url(redis_url) for _ in range(4))]
    barrier = threading.Barrier(len(stores))
    outcomes = []

    def count(s):
        barrier.wait()
        outcomes.append(s.count(club["id"], table["id"]))

    threads = [threading.Thread(target=count, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["counted", "done", "done", "done"]
    assert counted(redis_client, club, table["id"], players) == (1, 3, {1})


def test_a_worker_dying_between_the_finish_and_the_count_is_made_good_by_the_next_read(client, redis_client,
                                                                                       evening):
    club, players, table = evening
    TableStore(redis_client).finish(table["id"])  # the table's FINISH script ran; its worker died before the count
    assert counted(redis_client, club, table["id"], players) == (0, 0, set())
    assert redis_client.zscore(keys.club_uncounted(club["id"]), table["id"]) is not None  # the pending marker
    body = standings(client, club)  # the next read counts it
    assert row_of(body, players[0])["evenings"] == 1
    assert redis_client.zscore(keys.club_uncounted(club["id"]), table["id"]) is None
    assert client.post(f"/v1/tables/{table['id']}/finish", headers=bearer(table["token"])).status_code == 200
    assert standings(client, club) == body
    assert counted(redis_client, club, table["id"], players) == (1, 3, {1})


def test_a_write_of_the_club_also_completes_a_pending_count(client, redis_client, evening):
    club, players, table = evening
    TableStore(redis_client).finish(table["id"])
    add(client, club, "新人")
    assert counted(redis_client, club, table["id"], players) == (1, 3, {1})


def test_a_table_counts_in_the_season_current_when_it_was_finished(client, redis_client, evening):
    club, players, table = evening
    TableStore(redis_client).finish(table["id"])  # finished in s1 ...
    r = client.post(f"/v1/clubs/{club['id']}/seasons", json={"name": "春"}, headers=bearer(club["token"]))
    assert r.status_code == 201 and r.get_json()["id"] == "s2"  # ... counted after s2 opened (by this write)
    assert row_of(standings(client, club, "s1"), players[0])["evenings"] == 1
    assert standings(client, club)["season"] == "s2" and standings(client, club)["players"] == []
    later = play(client, club, [{"player": p} for p in players] + [{"guest": "客"}], [ZIMO])
    assert [r["player"] for r in standings(client, club, "s2")["players"]] == sorted(
        players, key=lambda p: -row_of(standings(client, club, "s2"), p)["total"])
    assert later["id"] in {orjson.loads(e)["table"] for e in redis_client.lrange(
        keys.club_history(club["id"], players[0]), 0, -1)}
    seasons = client.get(f"/v1/clubs/{club['id']}", headers=bearer(club["read_token"])).get_json()["seasons"]
    assert seasons[0]["ended"] == seasons[1]["started"] and seasons[1]["ended"] is None


def test_an_unfinished_table_counts_nowhere_and_a_stale_reservation_goes(client, redis_client, evening, monkeypatch):
    club, players, table = evening
    assert standings(client, club)["players"] == []
    from service.store import clubs as clubs_module

    client.delete(f"/v1/tables/{table['id']}", headers=bearer(table["token"]))
    standings(client, club)
    assert redis_client.zscore(keys.club_uncounted(club["id"]), table["id"]) is not None  # (young: kept)
    monkeypatch.setattr(clubs_module, "RESERVATION_MS", -1)
    standings(client, club)
    assert redis_client.zscore(keys.club_uncounted(club["id"]), table["id"]) is None


# -- merges ---------------------------------------------------------------------------------------------
def test_a_merge_joins_the_histories_and_counts_the_seasons_again(client, evening):
    club, players, table = evening
    client.post(f"/v1/tables/{table['id']}/finish", headers=bearer(table["token"]))
    twin = add(client, club, "王哥")
    play(client, club, [{"player": twin}, {"player": players[1]}, {"player": players[2]}, {"guest": "客"}], [ZIMO])
    r = client.post(f"/v1/clubs/{club['id']}/players/{twin}/merge", json={"into": players[0]},
                    headers=bearer(club["token"]))
    assert r.status_code == 200, r.get_data(as_text=True)
    page = r.get_json()
    assert page["id"] == players[0] and page["merged"] == [twin] and "王哥" in page["aliases"]
    assert [h["total"] for h in page["history"]] == [72, 36] and page["lifetime"]["evenings"] == 2
    assert row_of(standings(client, club), players[0])["evenings"] == 2
    assert twin not in {r["player"] for r in standings(client, club)["players"]}
    # the merged id still names the player
    assert client.get(f"/v1/clubs/{club['id']}/players/{twin}", headers=bearer(club["read_token"])).get_json()["id"] \
        == players[0]
    again = play(client, club, [{"player": twin}, {"player": players[1]}, {"player": players[2]}, {"guest": "客"}],
                 [ZIMO])
    assert again["seats"][0] == {"player": players[0]}


# -- import -----------------------------------------------------------------------------------------------
def imported(client, club, text: str, token: str | None = None):
    return client.post(f"/v1/clubs/{club['id']}/import", data=text.encode(), content_type="text/csv",
                       headers=bearer(token or club["token"]))


def test_an_import_is_all_rows_or_none(client, redis_client):
    club = new_club(client)
    a, b, c = (add(client, club, n) for n in ("老王", "小李", "阿珍"))
    client.patch(f"/v1/clubs/{club['id']}/players/{a}", json={"aliases": ["王哥"]}, headers=bearer(club["token"]))
    bad = "date,player,total\n2025-11-07,王哥,40\n2025-11-07,小李,-40\n2025/11/14,阿珍,x\n2025-11-14,无名,5\n"
    body = problem(imported(client, club, bad), 422, "bad_rows")
    assert set(body["errors"]) == {"4.total", "5.player"}
    assert redis_client.hlen(keys.club_results(club["id"])) == 0 and standings(client, club)["players"] == []
    good = ("date,player,total,rounds\n2025-11-07,王哥,40,8\n2025-11-07,小李,-40,8\n"
            "2025/11/14,阿珍,30,8\n2025年11月14日,老王,-30,8\n")
    r = imported(client, club, good)
    assert r.status_code == 201, r.get_data(as_text=True)
    assert r.get_json()["evenings"] == 2 and r.get_json()["season"] == "s1"
    mine = row_of(standings(client, club), a)
    assert (mine["evenings"], mine["rounds"], mine["total"]) == (2, 16, 10)
    history = client.get(f"/v1/clubs/{club['id']}/players/{a}", headers=bearer(club["token"])).get_json()["history"]
    assert [(h["finished_at"][:10], h["total"], h["rank"], h["imported"]) for h in history] == \
        [("2025-11-07", 40, 1, True), ("2025-11-14", -30, 2, True)]
    again = imported(client, club, good)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    before = standings(client, club)
    overlap = good + "2025-11-21,老王,1\n2025-11-21,阿珍,-1\n"
    body = problem(imported(client, club, overlap), 409, "already_imported")
    assert set(body["errors"]) == {"2", "3", "4", "5"}
    assert standings(client, club) == before
    excel = ("\ufeff日期,玩家,总分\r\n2025/11/21,老王,+12\r\n2025/11/21,阿珍,-12\r\n").encode("gb18030")
    r = client.post(
        f"/v1/clubs/{club['id']}/import", data=excel, content_type="text/csv", headers=bearer(club["token"])
    )
    assert r.status_code == 201, r.get_data(as_text=True)
    problem(imported(client, club, good, club["read_token"]), 403, "forbidden")
    problem(client.post(f"/v1/clubs/{club['id']}/import", json={"rows": []}, headers=bearer(club["token"])),
            415, "unsupported_media_type")


# -- the problems ------------------------------------------------------------------------------------------
def test_the_problems(client):
    club, other = new_club(client), new_club(client, name="另一个")
    a, b = add(client, club, "老王"), add(client, club, "小李")
    stranger = add(client, other, "外人")
    read, write = bearer(club["read_token"]), bearer(club["token"])
    base = f"/v1/clubs/{club['id']}"
    problem(client.get("/v1/clubs/0123456789abcdef", headers=read), 404, "club_not_found")
    problem(client.get("/v1/clubs/nope", headers=read), 404, "club_not_found")
    problem(client.get(f"{base}/players/p000000000000", headers=read), 404, "player_not_found")
    problem(client.get(f"{base}/players/{stranger}", headers=read), 404, "player_not_found")
    problem(client.get(f"{base}/seasons/s9/standings", headers=read), 404, "season_not_found")
    problem(client.get(base), 401, "unauthorized")
    problem(client.get(base, headers=bearer(other["token"])), 401, "unauthorized")
    for method, path, body in (("POST", "/players", {"name": "X"}), ("PATCH", f"/players/{a}", {"name": "Y"}),
                               ("POST", f"/players/{a}/merge", {"into": b}), ("POST", "/seasons", {"name": "s"}),
                               ("POST", "/tables", {"players": [{"player": a}, {"player": b}, {"guest": "1"},
                                                                {"guest": "2"}]})):
        problem(client.open(base + path, method=method, json=body, headers=read), 403, "forbidden")
    problem(client.post(f"{base}/players/{a}/merge", json={"into": a}, headers=write), 422, "merge_into_itself")
    body = problem(client.post(f"{base}/players/{a}/merge", json={"into": stranger}, headers=write), 422,
                   "player_not_in_club")
    assert body["errors"] == {"into": ["not a player of this club"]}
    body = problem(client.post(f"{base}/tables", json={"players": [{"player": a}, {"player": stranger},
                                                                   {"guest": "1"}, {"guest": "2"}]},
                               headers=write), 422, "player_not_in_club")
    assert list(body["errors"]) == ["players.1.player"]
    problem(client.post(f"{base}/tables", json={"players": [{"player": a}, {"player": a}, {"guest": "1"},
                                                            {"guest": "2"}]}, headers=write), 422,
            "player_seated_twice")
    problem(client.post(f"{base}/tables", json={"players": [{"player": a, "guest": "x"}, {"guest": "1"},
                                                            {"guest": "2"}, {"guest": "3"}]}, headers=write),
            422, "invalid_input")
    problem(client.post(f"{base}/tables", json={"players": [{"player": a}, {"guest": "1"}, {"guest": "2"}]},
                        headers=write), 422, "bad_players")
    problem(client.post(f"{base}/players", json={"name": "老王"}, headers=write), 409, "name_taken")
    problem(client.post(f"{base}/players", json={"name": "  "}, headers=write), 422, "invalid_input")
    problem(client.post("/v1/clubs", json={"name": "x", "order": "luck"}), 422, "invalid_input")
    assert client.get(base, headers=read).get_json()["players"] == [
        {"id": b, "name": "小李", "aliases": [], "merged": []}, {"id": a, "name": "老王", "aliases": [], "merged": []}]


def test_a_club_creation_replays_under_its_idempotency_key(client):
    key = "5f0c2a8e-1b7d-4c3e-9a4f-2d6b8e1c0f7a"
    first = client.post("/v1/clubs", json={"name": "A"}, headers={"Idempotency-Key": key})
    again = client.post("/v1/clubs", json={"name": "A"}, headers={"Idempotency-Key": key})
    assert first.status_code == again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert first.get_json()["token"] == again.get_json()["token"]
    problem(client.post("/v1/clubs", json={"name": "B"}, headers={"Idempotency-Key": key}), 422,
            "idempotency_key_reused")



@pytest.mark.parametrize("caller", ["club token", "API key", "club token and another key"])
def test_a_replayed_club_table_creation_is_free_of_the_tables_limit(redis_url, caller):
    """As for ``POST /v1/tables``: an exact retry of a club table's creation creates nothing and is not counted
    against ``TABLES_PER_HOUR``, however the club is reached (a phone holds the club's token alone, and the
    table belongs to the club's API key); the same key with another body counts."""
    app = make_app(redis_url, API_KEYS=f"acme={ACME},beta={BETA}", TABLES_PER_HOUR=2)
    client = app.test_client()
    club = client.post("/v1/clubs", json={"name": "A"}, headers={"X-API-Key": ACME}).get_json()
    players = [add(client, club, n) for n in "ABCD"]
    auth = {"club token": bearer(club["token"]), "API key": {"X-API-Key": ACME},
            "club token and another key": {**bearer(club["token"]), "X-API-Key": BETA}}[caller]
    url = f"/v1/clubs/{club['id']}/tables"
    seats = {"players": [{"player": p} for p in players]}
    key = {"Idempotency-Key": "0b6e5f8a-3c2d-4e1f-8a9b-7c6d5e4f3a2b", **auth}
    first = client.post(url, json=seats, headers=key)                                     # 1 of 2
    assert first.status_code == 201, first.get_data(as_text=True)
    for _ in range(4):
        again = client.post(url, json=seats, headers=key)                                 # free
        assert again.status_code == 201, again.get_data(as_text=True)
        assert again.headers["Idempotent-Replayed"] == "true" and again.get_json() == first.get_json()
    guess = client.post(url, json={"players": seats["players"][::-1]}, headers=key)       # 2 of 2
    problem(guess, 422, "idempotency_key_reused")
    assert client.post(url, json=seats, headers=key).status_code == 201                   # still free
    problem(client.post(url, json=seats, headers=auth), 429, "too_many_requests")         # a new table counts
    # the retry of a caller who may not create the club's tables (its read token) is no replay: it counts
    problem(client.post(url, json=seats, headers={**key, **bearer(club["read_token"])}), 429, "too_many_requests")

# -- standings as CSV, rounds as CSV ----------------------------------------------------------------------
def test_standings_as_csv_open_in_excel(client, evening):
    club, players, table = evening
    client.post(f"/v1/tables/{table['id']}/finish", headers=bearer(table["token"]))
    r = client.get(f"/v1/clubs/{club['id']}/seasons/s1/standings", headers={**bearer(club["read_token"]),
                                                                           "Accept": "text/csv"})
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert r.data.startswith("\ufeff".encode())
    lines = r.data.decode("utf-8-sig").splitlines()
    assert lines[0].startswith("rank,name,player,ranked,evenings,rounds,total,")
    assert [line.split(",")[1] for line in lines[1:]] == ["老王", "小李", "阿珍"]
    by_rating = standings(client, club, order="rating")
    assert by_rating["order"] == "rating"


def test_a_tables_rounds_as_csv(client, evening):
    club, players, table = evening
    view = client.get(f"/v1/tables/{table['id']}", headers=bearer(table["token"])).get_json()
    text = rounds_csv(view["players"], view["rounds"]).decode("utf-8-sig").splitlines()
    paged = table_rounds_csv(client.application.extensions["tables"], table["id"], Access(table["read_token"], False),
                             page=1)
    assert paged.decode("utf-8-sig").splitlines() == text
    assert text[0] == "round,seat,player,dealer,delta,running"
    assert text[1:5] == ["1,0,老王,1,36,36", "1,1,小李,0,-12,-12", "1,2,阿珍,0,-12,-12", "1,3,客人,0,-12,-12"]
    assert text[5] == "2,0,老王,1,36,72" and len(text) == 9


DIANPAO = [{"type": "hu", "tile": "7s", "from": 2, "winners": [{"seat": 1, "fan": 3}]}]


@pytest.mark.parametrize("stakes", [None, {"coin_per_point": 10, "fee": 5, "bankrolls": [900, 900, 900, 900]}])
def test_get_rounds_as_csv_opens_in_a_spreadsheet_with_the_jsons_figures(client, stakes):
    club = new_club(client)
    players = [add(client, club, n) for n in ("老王", "小李", "阿珍")]
    table = play(client, club, [{"player": p} for p in players] + [{"guest": "客人"}], [ZIMO, DIANPAO, ZIMO],
                 finish=False, **({"stakes": stakes} if stakes else {}))
    for event in ({"type": "round_start"}, *DIANPAO):  # a round being played: in the JSON, not in the CSV
        assert client.post(f"/v1/tables/{table['id']}/events", json=event,
                           headers=bearer(table["token"])).status_code == 201
    url = f"/v1/tables/{table['id']}/rounds"
    r = client.get(url, query_string={"limit": 1}, headers={**bearer(table["read_token"]), "Accept": "text/csv"})
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert r.headers["Content-Disposition"] == f'attachment; filename="rounds-{table["id"]}.csv"'
    assert r.data.startswith("\ufeff".encode()) and b"\r\n" in r.data
    rows = list(csv.DictReader(io.StringIO(r.data.decode("utf-8-sig"), newline="")))
    explained = client.get(url, headers=bearer(table["read_token"])).get_json()["rounds"]
    ended = [x for x in explained if x["status"] == "ended"]
    assert len(ended) == 3 and len(explained) == 4 and len(rows) == 3 * 4
    names = ["老王", "小李", "阿珍", "客人"]
    running = [0] * 4
    for row, (rnd, seat) in zip(rows, [(x, i) for x in ended for i in range(4)]):
        running[seat] += rnd["deltas"][seat]
        assert (int(row["round"]), int(row["seat"]), row["player"]) == (rnd["number"], seat, names[seat])
        assert int(row["dealer"]) == int(rnd["dealer"] == seat)
        assert (int(row["delta"]), int(row["running"])) == (rnd["deltas"][seat], running[seat])
        if stakes:
            assert (int(row["coins_delta"]), int(row["fees"])) == (rnd["coins_delta"][seat], rnd["fees"][seat])
        else:
            assert "coins_delta" not in row
    view = client.get(f"/v1/tables/{table['id']}", headers=bearer(table["token"])).get_json()
    assert running == [b - d for b, d in zip(view["balances"], explained[-1]["deltas"])]  # (the round played)
    problem(client.get(url, headers={"Accept": "text/csv"}), 401, "unauthorized")  # (a problem, as JSON)


# -- API keys and webhooks ---------------------------------------------------------------------------------
def test_a_key_sees_only_its_own_clubs_and_gets_season_updated(redis_url, redis_client):
    client = make_app(redis_url, API_KEYS=f"acme={ACME},beta={BETA}").test_client()
    r = client.post("/v1/clubs", json={"name": "A"}, headers={"X-API-Key": ACME})
    assert r.status_code == 201
    club = r.get_json()
    problem(client.post("/v1/clubs", json={"name": "A"}), 401, "api_key_required")
    assert client.get(f"/v1/clubs/{club['id']}", headers={"X-API-Key": ACME}).status_code == 200
    problem(client.get(f"/v1/clubs/{club['id']}", headers={"X-API-Key": BETA}), 404, "club_not_found")
    assert client.get(f"/v1/clubs/{club['id']}", headers=bearer(club["read_token"])).status_code == 200
    players = [add(client, club, n) for n in "ABCD"]
    table = play(client, club, [{"player": p} for p in players], [ZIMO])
    entries = redis_client.xrange(keys.outbox(keys.club_box(club["id"])))
    assert [(e[1][b"t"], e[1][b"o"]) for e in entries] == [(b"season.updated", b"acme")]
    data = orjson.loads(entries[0][1][b"d"])
    assert data["club"] == club["id"] and data["season"] == "s1" and data["table"] == table["id"]
    assert redis_client.zscore(keys.WEBHOOKS_DUE, keys.club_box(club["id"])) is not None
    # the table is the key's too (its owner is the club's)
    assert client.get(f"/v1/tables/{table['id']}", headers={"X-API-Key": ACME}).status_code == 200


def test_season_updated_is_delivered_to_the_keys_webhook(redis_url):
    from service.store.redis_client import connect
    from service.webhooks.dispatcher import Dispatcher, DispatcherOptions
    from tests.receivers import Receiver

    app = make_app(redis_url, API_KEYS=f"acme={ACME}", WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT=1)
    client = app.test_client()
    receiver = Receiver()
    d = None
    try:
        r = client.post("/v1/webhooks", json={"url": receiver.url, "events": ["season.updated"]},
                        headers={"X-API-Key": ACME})
        assert r.status_code == 201, r.get_data(as_text=True)
        d = Dispatcher(connect(redis_url), app.extensions["webhooks"],
                       DispatcherOptions(timeout=1.0, poll=0.02, sweep_every=3600.0, allow_private=True)).start()
        club = client.post("/v1/clubs", json={"name": "A"}, headers={"X-API-Key": ACME}).get_json()
        players = [add(client, club, n) for n in "ABCD"]
        play(client, club, [{"player": p} for p in players], [ZIMO])
        receiver.wait(lambda rc: rc.messages(), what="season.updated")
        (message,) = receiver.messages()
        assert message["type"] == "season.updated" and message["data"]["club"] == club["id"]
        assert sorted(message["data"]["players"]) == sorted(players)
    finally:
        if d is not None:
            d.stop(wait=3.0)
        receiver.close()

