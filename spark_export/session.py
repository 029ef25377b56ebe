"""A SparkSession for the exporter: the active one under spark-submit, else a small local one."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    # C1-only JIT: roughly halves start-up and short queries; the exporter's work is in Python.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    # The same for the executors of a cluster master (local-cluster starts a JVM for each).
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # The exporter reports its own progress; Spark's console bar would interleave with it.
    "spark.ui.showConsoleProgress": "false",
}


def get_session(
    master: str | None = None,
    app_name: str = "groupcoord-export",
    conf: dict[str, str] | None = None,
):
    """The active session if there is one (spark-submit), else a new one on ``master``
    (default ``local[2]``). Workers run this interpreter, so they import the same groupcoord."""
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = SparkSession.builder.appName(app_name)
    if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Not under spark-submit (which starts the JVM first and names the master itself).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = builder.master(master or "local[2]")
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
