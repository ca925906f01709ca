"""Bounded jobs over the same parts: the backfill of a topic's time range, the batch file job."""
