"""The LLM judge: critiques of recorded debates (critique) and the judge run that asks for
them (runner)."""
