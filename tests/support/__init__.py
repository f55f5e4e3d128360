"""What the tests share that is not a test: fixtures' KBs, live servers, a scripted LLM, canaries, fuzz corpora."""
