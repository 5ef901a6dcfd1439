"""The high watermark survives a restart in Kafka's replication-offset-checkpoint, so a
restarted follower without leader-epoch history truncates to it rather than to zero."""
from __future__ import annotations

from broker.log import LogConfig, LogManager
from clients.protocol.records import Record, build_batch


def _manager(tmp_path) -> LogManager:
    return LogManager([str(tmp_path / "logs")], LogConfig())


def test_high_watermark_checkpointed_and_restored(tmp_path):
    m = _manager(tmp_path)
    log = m.create_log("t", 0)
    for i in range(5):
        log.append_as_leader(build_batch([Record(None, b"v%d" % i)]), 0)
    log.high_watermark = 3
    m.close()
    text = (tmp_path / "logs" / "replication-offset-checkpoint").read_text().split("\n")
    assert text[:3] == ["0", "1", "t 0 3"]
    m2 = _manager(tmp_path)
    assert m2.get_log("t", 0).high_watermark == 3
    m2.close()


def test_checkpoint_after_crash_and_clamped_to_the_log(tmp_path):
    m = _manager(tmp_path)
    log = m.create_log("t", 0)
    log.append_as_leader(build_batch([Record(None, b"a"), Record(None, b"b")]), 0)
    log.high_watermark = 2
    m.checkpoint_recovery_points()          # periodic checkpoint, then no clean close
    log.high_watermark = 2
    # The log loses its tail (e.g. a torn write truncated on recovery): HW cannot exceed it.
    (tmp_path / "logs" / "replication-offset-checkpoint").write_text("0\n1\nt 0 99\n")
    m2 = _manager(tmp_path)
    assert m2.get_log("t", 0).high_watermark == 2
    m2.close()
