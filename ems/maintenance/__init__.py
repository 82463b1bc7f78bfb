"""Scheduled maintenance: the scheduler and its jobs (purge, housekeeping, offset
snapshots), and the checkpoints that let a long job resume."""
