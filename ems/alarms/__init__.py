"""Alarms: the rules (pure), the scan that observes and applies them, the webhook."""
