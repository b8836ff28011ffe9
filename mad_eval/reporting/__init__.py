"""What a reader sees: runs with their metrics (results), console views, tables and their
layouts, plots, and runs paired at equal spending for them (pairing)."""
