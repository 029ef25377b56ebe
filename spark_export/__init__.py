"""PySpark exporter of the partition logs into Delta tables, and analytics over them.

Entry points: ``exporter.export`` (the exactly-once export), ``report.export_and_report`` (what
``groupcoord demo`` calls), ``cli.export_main`` / ``cli.report_main`` (``groupcoord export`` /
``groupcoord report``), ``python -m groupcoord.spark_export`` (spark-submit).
"""
