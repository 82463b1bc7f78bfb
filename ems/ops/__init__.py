"""What operators run: message query and trace, offset reset and replay, dead letters,
topic ranking, the admin console's accounts and audit trail and its read models (browse).
Called by the CLI and the console; scheduled work is in ems.maintenance."""
