"""The run folder, the source of truth: its turns (folder), manifest, questions, and the
file writes that keep it whole (files)."""
