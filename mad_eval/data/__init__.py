"""Where questions come from: benchmark specs and their loaders (benchmarks), and whether
the Hugging Face Hub can be reached (hub)."""
