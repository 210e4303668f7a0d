"""Diff, citation status and stale-report assets."""
