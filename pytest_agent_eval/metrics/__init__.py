"""The metrics read off one transcript (occupancy, sufficiency, allocation, contamination), the catalogue of
figures built on them, the scorecard that computes them all, and the gates that fail a run on them."""
