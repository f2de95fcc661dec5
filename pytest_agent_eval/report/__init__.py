"""What a campaign prints and writes: the per-metric blocks, the terminal tables and verdict lines, the comparison
with a baseline, summary.json and report.html."""
