"""``python -m worker compare``: how a candidate model's answers differ from the live model's.

pairs.py   what is compared: a request's two answers (shadow records, replies)
leaves.py  outputs as leaves: numbers (regression) and labels (classification)
report.py  the comparison: pairs in, a report out (pure)
render.py  the report as text or JSON
read.py    records to pairs: shadow records, or two reply topics joined by id
"""
