"""A log's id: made once when a writer first opens the directory, kept for good after that; and
the CRC of the batch that holds an offset, which tells a copy that went its own way from it."""

import os
import shutil

import pytest

from groupcoord.storage import (
    LOG_ID_FILE,
    CorruptLogError,
    LogConfig,
    batch_crc_holding,
    list_segments,
    open_partition_log,
    read_log_id,
)

from .helpers import records_between


def test_a_new_log_gets_an_id_that_restarts_and_rolls_keep(tmp_path):
    path = str(tmp_path / "partition-0")
    assert read_log_id(str(tmp_path)) is None  # a directory no writer opened has none
    with open_partition_log(path) as log:
        log.append(records_between(0, 10))
        identity = read_log_id(path)
    assert identity is not None and 0 < identity < 1 << 62
    for start in range(10, 200, 10):  # new incarnations (epochs); small segments roll
        with open_partition_log(path, LogConfig(segment_bytes=4096)) as log:
            log.append(records_between(start, start + 10))
    assert len(list_segments(path)) > 1
    assert read_log_id(path) == identity


def test_another_log_gets_another_id(tmp_path):
    ids = set()
    for n in range(20):
        with open_partition_log(str(tmp_path / f"partition-{n}")):
            pass
        ids.add(read_log_id(str(tmp_path / f"partition-{n}")))
    assert len(ids) == 20


def test_a_log_written_before_logs_had_ids_gets_one_when_a_writer_opens_it(tmp_path):
    path = str(tmp_path)
    with open_partition_log(path) as log:
        log.append(records_between(0, 10))
    os.remove(os.path.join(path, LOG_ID_FILE))
    assert read_log_id(path) is None
    with open_partition_log(path) as log:
        log.append(records_between(10, 20))
    assert read_log_id(path) is not None


@pytest.mark.parametrize(
    "content",
    [b"{", b"[]", b'{"log_id": "7"}', b'{"log_id": 0}', b'{"log_id": 4611686018427387904}'],
)
def test_an_unreadable_id_is_damage_not_a_new_log(tmp_path, content):
    path = str(tmp_path)
    with open_partition_log(path):
        pass
    with open(os.path.join(path, LOG_ID_FILE), "wb") as f:
        f.write(content)
    with pytest.raises(CorruptLogError, match="log.id"):
        read_log_id(path)
    with pytest.raises(CorruptLogError):  # the writer does not replace it with a new one
        open_partition_log(path)
    with open(os.path.join(path, LOG_ID_FILE), "rb") as f:
        assert f.read() == content


def test_a_batch_crc_tells_a_copy_that_went_its_own_way_from_the_log(tmp_path):
    # A copy keeps the log's id; what the exporter compares besides (spark_export.lake's
    # tail_fingerprint) is the CRC of the batch that holds an offset.
    path, copy = str(tmp_path / "partition-0"), str(tmp_path / "copy")
    with open_partition_log(path, LogConfig(segment_bytes=4096)) as log:
        for start in range(0, 60, 6):  # several appends, and segments that roll
            log.append(records_between(start, start + 6))
    assert len(list_segments(path)) > 1
    crcs = [batch_crc_holding(path, offset) for offset in range(60)]
    assert all(crc is not None for crc in crcs)
    assert [len(set(crcs[s : s + 6])) for s in range(0, 60, 6)] == [1] * 10  # one batch each
    assert len(set(crcs)) == 10
    assert batch_crc_holding(path, 60) is None and batch_crc_holding(path, -1) is None

    shutil.copytree(path, copy)
    with open_partition_log(path) as log:
        log.append(records_between(60, 66))
    with open_partition_log(copy) as log:
        log.append(records_between(100, 106))  # other records at the same offsets
    assert [batch_crc_holding(copy, o) for o in range(60)] == crcs
    assert batch_crc_holding(copy, 60) not in (None, batch_crc_holding(path, 60))

    first = list_segments(path)[0]
    os.remove(first.path)  # as retention removes a segment
    assert batch_crc_holding(path, first.base_offset) is None
