"""Kept regex resolutions (coordinator/regex_topics.py) are always exactly what matching the regex
against the whole catalog gives, through creates, grows and deletes, and stay bounded."""

from __future__ import annotations

import random

from groupcoord.coordinator import regex_topics
from groupcoord.coordinator.regex_topics import RegexTopics
from groupcoord.coordinator.topic_regex import compile_regex

REGEXES = ("orders-.*", ".*-eu", "orders-(1|2)-eu", ".*", "payments", "x.")


def fresh(regex: str, catalog: dict[str, int]) -> frozenset[str]:
    pattern = compile_regex(regex)
    return frozenset(topic for topic in catalog if pattern.fullmatch(topic))


def test_kept_resolutions_follow_every_change_seeded():
    rng = random.Random(5)
    names = [f"{kind}-{n}{region}" for kind in ("orders", "payments", "x") for n in range(4)
             for region in ("", "-eu")] + ["payments", "xy"]  # fmt: skip
    for _ in range(20):
        catalog = {name: 1 for name in rng.sample(names, 8)}
        kept = RegexTopics()
        for _ in range(60):
            for regex in rng.sample(REGEXES, 3):  # asked in varying order: LRU moves
                assert kept.matching(regex, catalog) == fresh(regex, catalog), regex
            changes: dict[str, int | None] = {}
            for name in rng.sample(names, rng.randint(1, 4)):
                if name in catalog and rng.random() < 0.4:
                    changes[name] = None
                else:
                    changes[name] = catalog.get(name, 0) + 1  # created or grown
            for name, count in changes.items():
                if count is None:
                    catalog.pop(name, None)
                else:
                    catalog[name] = count
            kept.changed(changes)
        for regex in REGEXES:
            assert kept.matching(regex, catalog) == fresh(regex, catalog)


def test_a_resolution_is_made_once_until_the_catalog_is_replaced():
    kept = RegexTopics()
    first = kept.matching("orders-.*", {"orders-1": 1, "other": 1})
    assert first == {"orders-1"}
    # Asked again against the same catalog, the kept one is returned as it is.
    assert kept.matching("orders-.*", {"orders-1": 1, "other": 1}) is first
    kept.clear()  # a whole new catalog
    assert kept.matching("orders-.*", {"orders-2": 1}) == {"orders-2"}


def test_resolutions_are_bounded_in_count_names_and_work_per_change(monkeypatch):
    monkeypatch.setattr(regex_topics, "MAX_REGEXES", 3)
    monkeypatch.setattr(regex_topics, "MAX_RESOLVED_NAMES", 5)
    monkeypatch.setattr(regex_topics, "MAX_CHANGE_CHECKS", 8)
    catalog = {f"t{n}": 1 for n in range(4)}
    kept = RegexTopics()
    for regex in ("t0", "t1", "t2", "t3"):
        kept.matching(regex, catalog)
    assert len(kept) == 3  # the least recently used ("t0") was dropped
    kept.matching("t.*", catalog)  # four names: with the others' two, past five
    assert len(kept) == 2
    assert kept.matching("t.*", catalog) == set(catalog)
    kept.changed({"t4": 1})  # 1 name x 2 kept: followed
    catalog["t4"] = 1
    assert len(kept) == 1 and kept.matching("t.*", catalog) == set(catalog)  # 5 names now
    kept.matching("t1", catalog)  # one name more than five: "t.*" dropped
    assert len(kept) == 1
    kept.changed({f"u{n}": 1 for n in range(9)})  # 9 names x 1 kept: past 8, dropped
    assert len(kept) == 0
