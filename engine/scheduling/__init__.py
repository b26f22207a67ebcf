"""Cron schedules, backfill date lists and dependent-task date cycles."""
