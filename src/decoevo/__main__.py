from decoevo.cli import app

app()
