"""The run folder, the source of truth: read and written through folder.RunStore (its
records read back by lines, its manifest by manifest, older folders read in today's shape by
upgrade), its files named once (names), and the file writes that keep it whole (files)."""
