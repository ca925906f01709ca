"""The streaming job: the loop (a small scheduler) and the policies it calls."""
