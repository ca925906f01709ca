"""``python -m worker compare``: how a candidate model's answers differ from the live model's.

pairs.py    what is compared: a request's two answers (shadow records, replies)
leaves.py   outputs as leaves: numbers (regression) and labels (classification)
report.py   the comparison: pairs in, a report out (pure)
render.py   the report as text or JSON
read.py     records to pairs: shadow records, or two reply topics joined by id
topics.py   reading a topic to its end offsets at start, in no group (kafka-python)
plot.py     --plot: histograms and confusion heatmaps (matplotlib)
command.py  the command: flags, what is read, exit codes
"""
