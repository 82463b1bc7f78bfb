"""Spark jobs over the ems tables: consumption-log compaction and consumer-group lag reports.

jobs/ holds the entry points (`spark-submit spark/jobs/<job>.py`, or `ems spark ...`);
transforms/ the pure DataFrame functions they are built from.
"""
