"""``python -m groupcoord.spark_export export|report ...``; also a script for spark-submit:
``spark-submit spark_export/__main__.py export --logs DIR --lake DIR`` (absolute import so it
runs outside its package)."""

import sys

from groupcoord.spark_export.cli import main

sys.exit(main())
