"""bench/rebalance_members.py's Ledger: the partition-seconds without an owner that
bench/rebalance.py reports, on a hand-driven clock."""

from bench.rebalance_members import Ledger


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_ledger_splits_unowned_time_into_moved_and_unaffected_partitions():
    clock = Clock()
    ledger = Ledger(4, clock=clock)
    ledger.expect({0, 1})
    ledger.take(0, [0, 1])
    assert not ledger.settled.is_set()  # partitions 2 and 3 have no owner yet
    ledger.take(1, [2, 3])
    assert ledger.settled.is_set() and ledger.settled_at == 100.0

    ledger.expect({0, 1, 2})  # a newcomer: member 1's share is now too big
    assert not ledger.settled.is_set()
    ledger.start()
    clock.now = 101.0
    ledger.release(0, [0, 1])  # eager: member 0 gives up everything, 1 of them for good
    clock.now = 103.0
    ledger.take(0, [0])
    assert not ledger.settled.is_set()  # partition 1 still has no owner
    clock.now = 104.0
    ledger.take(2, [1])
    assert ledger.settled.is_set() and ledger.settled_at == 104.0
    assert ledger.finish() == {
        "moved_partitions": 1,
        "unowned_moved_partition_s": 3.0,  # partition 1, 101 -> 104
        "unowned_unaffected_partition_s": 2.0,  # partition 0, 101 -> 103
        "double_owned_partition_s": 0.0,
    }


def test_ledger_counts_two_owners_and_an_unbalanced_share_is_not_settled():
    clock = Clock()
    ledger = Ledger(4, clock=clock)
    ledger.expect({0, 1})
    ledger.take(0, [0, 1, 2])
    ledger.take(1, [3])
    assert not ledger.settled.is_set()  # 3 and 1: not a balanced share of 4 over 2
    ledger.start()
    ledger.take(1, [2])  # before member 0 revoked it
    clock.now = 100.5
    ledger.release(0, [2])
    assert ledger.settled.is_set()
    result = ledger.finish()
    assert result["double_owned_partition_s"] == 0.5
    assert result["moved_partitions"] == 1  # partition 2: member 0 -> member 1
    assert result["unowned_moved_partition_s"] == 0.0
