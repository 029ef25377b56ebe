"""Crash consistency and corruption: acknowledged data survives, damage is always detected.

* A writer subprocess is SIGKILLed at random moments, many times over the same log; after each
  kill every acknowledged record must load back intact and nothing half-written may appear.
* Random bytes of the final (never acknowledged) append are flipped or cut off: open and load
  must succeed, report the truncation, and keep every earlier append.
* Damage to acknowledged data followed by later appends must be a CorruptLogError naming the
  file and position, from open, load and read_log alike; never another exception.
"""

import os
import random
import shutil
import signal
import subprocess
import sys

import pytest

from groupcoord.coordinator import Shard
from groupcoord.storage import (
    CorruptLogError,
    LogConfig,
    list_segments,
    load,
    log_start_offset,
    open_partition_log,
    read_log,
)
from groupcoord.storage.segments import read_segment_bytes, scan_segment
from groupcoord.storage.snapshot import list_snapshots

from .helpers import loaded_state, record_at, records_between, state_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ITERATIONS = int(os.environ.get("GROUPCOORD_CRASH_ITERATIONS", "25"))
CORRUPTION_SEEDS = int(os.environ.get("GROUPCOORD_CORRUPTION_SEEDS", "40"))
SMALL = LogConfig(
    segment_bytes=16 * 1024,
    max_record_bytes=1024,
    max_batch_bytes=2048,
    snapshot_every_records=0,
    snapshot_every_bytes=0,
)


def _check_log(path: str, reference: Shard, reference_end: int, acked: int) -> int:
    """Everything acknowledged is there, intact; returns the end offset the log recovered to."""
    readonly = Shard(0, 1)
    summary = load(path, readonly)
    end = summary.end_offset
    assert end >= acked, f"acknowledged up to {acked}, log ends at {end}"
    for record in records_between(reference_end, end):
        reference.replay(record)
    assert readonly.durable_state() == reference.durable_state()
    start = log_start_offset(path)
    entries = list(read_log(path, from_offset=start))
    assert [e.offset for e in entries] == list(range(max(start, 0), end))
    assert all(e.record == record_at(e.offset) for e in entries), (
        "a record differs from what was written"
    )
    with open_partition_log(path) as log:  # the writer's recovery agrees
        assert log.end_offset == end
        state, _ = loaded_state(log)
    assert state == reference.durable_state()
    return end


def test_sigkill_at_random_moments_never_loses_an_acknowledged_append(tmp_path):
    rng = random.Random(20240611)
    path = str(tmp_path / "partition-0")
    reference, reference_end, acked, kills_mid_run = Shard(0, 1), 0, 0, 0
    for iteration in range(ITERATIONS):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.storage.crash_writer", path, str(rng.randrange(1 << 30))],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            opened = child.stdout.readline()
            assert opened.startswith("OPEN "), child.stderr.read()
            assert int(opened.split()[1]) >= acked
            # Give it a random head start, then kill it mid-flight (no flush, no close).
            signal_after_s = rng.uniform(0.0, 0.3)
            try:
                child.wait(timeout=signal_after_s)
            except subprocess.TimeoutExpired:
                kills_mid_run += 1
            child.send_signal(signal.SIGKILL)
            out, err = child.communicate()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == -signal.SIGKILL, err
        acks = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ACK ")]
        acked = max([acked, *acks])
        reference_end = _check_log(path, reference, reference_end, acked)
        assert reference_end >= acked, iteration
    assert kills_mid_run == ITERATIONS and acked > 0
    snapshots = list_snapshots(path)  # retention ran between the kills
    # keep_snapshots=2, plus one when the last kill fell between a snapshot's rename and the
    # retention pass that follows it (a legitimate crash state, cleaned by the next snapshot).
    assert 1 <= len(snapshots) <= 3 and 0 < log_start_offset(path) <= snapshots[0][0]


# -- corruption --------------------------------------------------------------------------------


def _build(path: str, appends: int, rng: random.Random, config: LogConfig = SMALL):
    """A log of ``appends`` acknowledged appends plus a final one that we treat as unacknowledged
    (as if the writer died during its fsync). Returns (acked end, final end, final byte range)."""
    with open_partition_log(path, config) as log:
        for _ in range(appends):
            start = log.end_offset
            log.append(records_between(start, start + rng.randint(1, 40)))
        acked_end = log.end_offset
        last = list_segments(path)[-1]
        before = last.size_bytes
        log.append(records_between(acked_end, acked_end + rng.randint(20, 120)))
        final_end = log.end_offset
    last = list_segments(path)[-1]
    if last.size_bytes == before or last.base_offset == acked_end:  # the final append rolled
        before = 0
    return acked_end, final_end, last.path, before, last.size_bytes


def _flip(path: str, position: int, rng: random.Random) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ rng.randint(1, 255)]))


def _assert_recovers_to_the_acknowledged_end(path, acked_end, final_end, segment):
    reference = Shard(0, 1)
    summary = load(path, reference)  # read-only: skips, reports, keeps bytes
    end = summary.end_offset
    assert end == acked_end < final_end  # an append is all or nothing
    assert summary.truncated is not None and summary.truncated.offset == end
    assert summary.truncated.segment == segment
    assert reference.durable_state() == state_of(records_between(0, end))
    with open_partition_log(path) as log:
        assert log.truncated is not None and log.truncated.offset == end and log.truncated.bytes > 0
        assert log.end_offset == end
        state, summary = loaded_state(log)
        assert state == state_of(records_between(0, end)) and summary.truncated == log.truncated
        log.append(records_between(end, end + 5))  # and the log goes on from there
    with open_partition_log(path) as log:
        assert log.truncated is None and log.end_offset == end + 5
    assert [e.record for e in read_log(path)] == records_between(0, end + 5)


@pytest.mark.parametrize("seed", range(CORRUPTION_SEEDS))
def test_flipped_bytes_in_the_unacknowledged_tail_are_truncated(tmp_path, seed):
    rng = random.Random(seed)
    path = str(tmp_path)
    acked_end, final_end, segment, start, stop = _build(path, rng.randint(1, 30), rng)
    for _ in range(rng.randint(1, 4)):
        _flip(segment, rng.randrange(start, stop), rng)
    _assert_recovers_to_the_acknowledged_end(path, acked_end, final_end, segment)


@pytest.mark.parametrize("seed", range(CORRUPTION_SEEDS))
def test_a_torn_tail_is_truncated(tmp_path, seed):
    rng = random.Random(seed)
    path = str(tmp_path)
    acked_end, final_end, segment, start, stop = _build(path, rng.randint(1, 30), rng)
    cut = rng.randrange(start + 1, stop)
    with open(segment, "r+b") as f:
        f.truncate(cut)
        if rng.random() < 0.5:  # a crash may leave zeroed blocks too
            f.seek(cut)
            f.write(b"\0" * rng.randint(1, 4096))
    _assert_recovers_to_the_acknowledged_end(path, acked_end, final_end, segment)


@pytest.mark.parametrize("cut", ["mid_batch", "batch_boundary"])
def test_a_torn_multi_batch_append_is_dropped_whole(tmp_path, cut):
    # The final append's leading batches are intact and CRC-valid, but its last batch never
    # made it: none of its records were acknowledged, so none may survive recovery, and a
    # reader racing the writer must not see them either.
    path, config = str(tmp_path), LogConfig(max_record_bytes=1024, max_batch_bytes=2048)
    with open_partition_log(path, config) as log:
        log.append(records_between(0, 10))
        log.append(records_between(10, 150))  # many batches (max_batch_bytes=2048)
    segment = list_segments(path)[-1].path
    positions = [
        pos for pos, _ in scan_segment(read_segment_bytes(segment), segment, 0, True).batches
    ]
    assert len(positions) > 3
    os.truncate(segment, positions[3] + (50 if cut == "mid_batch" else 0))
    assert [e.offset for e in read_log(path)] == list(range(10))
    summary = load(path, Shard(0, 1))
    assert summary.end_offset == 10 and summary.truncated.position == positions[1]
    with open_partition_log(path, config) as log:
        assert log.end_offset == 10 and log.truncated.offset == 10
        assert os.path.getsize(segment) == positions[1]
        assert loaded_state(log)[0] == state_of(records_between(0, 10))
        log.append(records_between(10, 12))
    assert [e.record for e in read_log(path)] == records_between(0, 12)


@pytest.mark.parametrize("seed", range(CORRUPTION_SEEDS))
def test_damage_to_acknowledged_data_is_a_clear_error(tmp_path, seed):
    rng = random.Random(1000 + seed)
    path = str(tmp_path)
    _, _, _, final_start, _ = _build(path, rng.randint(20, 60), rng)
    segments = list_segments(path)
    sealed = (
        final_start == 0 or rng.random() < 0.5
    )  # the last segment may hold only the final append
    victim = rng.choice(segments[:-1]) if sealed else segments[-1]
    # Anywhere in acknowledged bytes: the final append after them stays intact.
    position = rng.randrange(0, victim.size_bytes if sealed else final_start)
    _flip(victim.path, position, rng)
    pristine = str(tmp_path / "copy")  # the damaged bytes, to check nothing changes
    os.makedirs(pristine)
    for segment in list_segments(path):
        shutil.copy(segment.path, pristine)

    def assert_names_the_damage(call):
        with pytest.raises(CorruptLogError) as info:
            call()
        assert info.value.path == victim.path and info.value.position <= position
        assert victim.path in str(info.value) and "corrupt" in str(info.value)

    assert_names_the_damage(lambda: load(path, Shard(0, 1)))
    assert_names_the_damage(lambda: list(read_log(path)))
    if sealed:  # open only checks the active segment
        with open_partition_log(path) as log:
            assert_names_the_damage(lambda: log.load_into(Shard(0, 1)))
    else:
        assert_names_the_damage(lambda: open_partition_log(path))
        assert_names_the_damage(lambda: open_partition_log(path))  # not LogLockedError: released
    for segment in list_segments(path):  # and nothing was repaired or deleted
        with (
            open(segment.path, "rb") as a,
            open(os.path.join(pristine, os.path.basename(segment.path)), "rb") as b,
        ):
            assert a.read() == b.read()


def test_every_reader_refuses_a_missing_segment_in_the_middle(tmp_path):
    # read_log used to skip it (580 of 600 offsets, jumping from 19 to 40) while load refused.
    path = str(tmp_path)
    _build(path, 60, random.Random(3))
    segments = list_segments(path)
    os.remove(segments[1].path)
    hole = rf"offsets {segments[1].base_offset}\.\.{segments[2].base_offset - 1} are missing"
    with pytest.raises(CorruptLogError, match=hole):
        load(path, Shard(0, 1))
    with pytest.raises(CorruptLogError, match=hole):
        list(read_log(path))
    with pytest.raises(CorruptLogError, match=hole):  # one split: the segment before it
        list(read_log(path, segment=segments[0]))
    with open_partition_log(path) as log, pytest.raises(CorruptLogError, match=hole):
        log.load_into(Shard(0, 1))
    # Reading from above the hole is fine: nothing there is missing.
    tail = list(read_log(path, from_offset=segments[2].base_offset))
    assert tail and tail[0].offset == segments[2].base_offset


def test_a_damaged_epoch_file_is_a_clear_error(tmp_path):
    with open_partition_log(str(tmp_path)):
        pass
    for damage in ("{not json", "[" * 50_000):  # before: json's RecursionError for the second
        with open(tmp_path / "epoch.json", "w") as f:
            f.write(damage)
        with pytest.raises(CorruptLogError, match="epoch"):
            open_partition_log(str(tmp_path))
    with open(tmp_path / "epoch.json", "w") as f:
        f.write('{"epoch": 41}')
    with open_partition_log(str(tmp_path)) as log:
        assert log.epoch == 42
