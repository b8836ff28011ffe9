"""What a run is set up from: its settings (config), its agents (roster) and the prompt
templates (templates, rendered in a sandbox)."""
