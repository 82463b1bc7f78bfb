"""Frozen values that cross layers (rows the operations read, alarm and autoscaling
values, scheduler leases). No I/O and no imports from above the ground floor."""
