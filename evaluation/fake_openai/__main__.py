"""`python -m evaluation.fake_openai`: the server on its own (see ``server.main``)."""

from evaluation.fake_openai.server import main

main()
