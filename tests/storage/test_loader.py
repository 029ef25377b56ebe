"""The loader's reporting (progress, summary) and its handling of the garbage collector."""

import gc

from groupcoord.coordinator import Shard
from groupcoord.storage import LoadProgress, LogConfig, load, loader, open_partition_log

from .helpers import records_between, state_of


def _partition(path, records=3000, snapshot_at=2000, freeze=True):
    config = LogConfig(snapshot_every_records=0, snapshot_every_bytes=0, freeze_loaded_state=freeze)
    with open_partition_log(path, config) as log:
        log.load_into(Shard(0, 1))
        log.append(records_between(0, snapshot_at))
        log.snapshot()
        for start in range(snapshot_at, records, 50):  # many batches: progress is per batch
            log.append(records_between(start, min(start + 50, records)))
    return config


def test_progress_is_reported_periodically_and_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "PROGRESS_EVERY", 100)
    _partition(str(tmp_path))
    seen: list[LoadProgress] = []
    shard = Shard(0, 1)
    summary = load(str(tmp_path), shard, progress=seen.append)
    phases = [p.phase for p in seen]
    assert phases[0] == "snapshot" and phases[-1] == "done" and "log" in phases
    assert phases.count("log") >= 5  # 1000 tail records, every 100
    assert [p.records for p in seen] == sorted(p.records for p in seen)
    assert seen[-1].records == summary.records == 1000
    assert seen[-1].offsets == summary.snapshot_offsets > 0
    assert seen[-1].bytes == summary.bytes > 0
    assert summary.snapshot_offset == 2000 and summary.start_offset == 2000
    assert summary.end_offset == 3000 and summary.truncated is None and summary.segments == 1
    assert summary.elapsed_ms >= summary.replay_ms >= 0 and summary.records_per_s > 0
    assert shard.durable_state() == state_of(records_between(0, 3000))


def test_the_collector_is_restored_and_frozen_only_when_configured(tmp_path):
    gc.unfreeze()
    for freeze in (False, True):
        path = str(tmp_path / str(freeze))
        config = _partition(path, freeze=freeze)
        gc.unfreeze()
        assert gc.isenabled()
        with open_partition_log(path, config) as log:
            log.load_into(Shard(0, 1))
        assert gc.isenabled()
        assert (gc.get_freeze_count() > 0) is freeze
        gc.unfreeze()
    gc.disable()
    try:  # a disabled collector stays disabled
        load(str(tmp_path / "True"), Shard(0, 1))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_failed_load_restores_the_collector_and_freezes_nothing(tmp_path):
    path = str(tmp_path)
    _partition(path)
    gc.unfreeze()

    class Exploding(Shard):
        def replay(self, record):
            raise RuntimeError("boom")

    with open_partition_log(path) as log:
        try:
            log.load_into(Exploding(0, 1))
        except RuntimeError:
            pass
        else:
            raise AssertionError("the replay error was swallowed")
        assert gc.isenabled() and gc.get_freeze_count() == 0
        shard = Shard(0, 1)  # and the same log can load again
        assert log.load_into(shard).records == 1000
    gc.unfreeze()
    assert shard.durable_state() == state_of(records_between(0, 3000))
