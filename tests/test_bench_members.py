"""bench/wire_members.py splits a group's members over processes and lays out the table they
share: every member in exactly one process, no two fields overlapping, the int64 fields
8-aligned (the memoryview casts need it)."""

from __future__ import annotations

import os

import pytest

from bench.wire_members import CLIENT_PROCESSES, READY_AT, Members, _Layout, _slices


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 16, 63, 64, 100])
def test_every_member_runs_in_exactly_one_process(count):
    slices = _slices(count)
    assert len(slices) == min(count, CLIENT_PROCESSES)
    assert [m for s in slices for m in s] == list(range(count))
    assert max(map(len, slices)) - min(map(len, slices)) <= 1  # balanced


@pytest.mark.parametrize(("members", "partitions"), [(1, 64), (16, 64), (100, 64), (3, 7)])
def test_the_shared_table_fields_do_not_overlap(members, partitions):
    lay = _Layout(members, partitions)
    assert READY_AT + CLIENT_PROCESSES <= lay.commits  # one ready byte per process
    assert lay.commits % 8 == 0 and lay.versions % 8 == 0
    assert lay.versions == lay.commits + 8 * members
    assert lay.owned == lay.versions + 8 * members
    assert lay.size == lay.owned + members * partitions


def test_a_row_being_rewritten_reads_as_not_yet_and_a_settled_one_as_its_partitions():
    # Before: owned() raised once 1,000 quick reads all met a row mid-rewrite, which a member
    # thread descheduled on a loaded machine can hold for longer, and ended a benchmark run.
    lay = _Layout(2, 3)
    members = Members.__new__(Members)  # the table alone, no processes
    members.layout, members.shared = lay, bytearray(lay.size)
    versions = memoryview(members.shared)[lay.versions : lay.owned].cast("q")
    members.shared[lay.owned : lay.size] = bytes([1, 0, 1, 0, 1, 0])
    versions[1] = 1  # member 1 is rewriting its row
    assert members.owned() is None
    versions[1] = 2
    assert members.owned() == [[0, 2], [1]]


@pytest.mark.parametrize("own_session", [True, False])
def test_the_member_processes_share_one_session_of_their_own_or_ours(own_session):
    # Linux's autogroup scheduling shares the CPUs between sessions first: in their own
    # session, every member process shares one (and none is left running by close()).
    members = Members("127.0.0.1:1", "g", "t", 5, 4, own_session=own_session)
    try:
        pids = members.pids
        assert len(pids) == 1 + min(5, CLIENT_PROCESSES)  # the launcher and its processes
        sessions = {os.getsid(pid) for pid in pids}
        assert len(sessions) == 1
        assert (sessions == {os.getsid(0)}) is not own_session
    finally:
        members.close()
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid)


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"
