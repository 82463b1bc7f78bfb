"""Frozen values that cross layers (rows the operations read, alarm and autoscaling
values, scheduler leases, the admin console's accounts and its sign-in throttle). No I/O
and no imports from above the ground floor."""
