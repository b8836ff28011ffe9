from mad_eval.cli import app

app()
