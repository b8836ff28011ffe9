from mad_eval.cli import app

# Guarded: vLLM spawns worker processes that import the main module again.
if __name__ == "__main__":
    app()
