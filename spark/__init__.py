"""Spark jobs over the ems tables: consumption-log compaction and consumer-group lag reports.

jobs/ holds the spark-submit entry points (`spark-submit spark/jobs/<job>.py`, or
`ems spark ...`): arguments only. compaction/ and lag/ hold each job's steps; transforms/
the pure DataFrame functions they are built from; the SQL they need lives in ems.store.
"""
