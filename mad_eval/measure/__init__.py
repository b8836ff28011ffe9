"""From turns to numbers: counts per question (counts), formulas, the metrics.json schema,
computing it (compute), the bootstrap, and the metric families (families: one module each)."""
