"""The `loopwright` command line. `main` parses and dispatches (cli.main); each command
lives in its own module: run (fix, build), server (serve, worker), admin (the rest), with
the wiring of a command-line mission in cli.wiring and what they share in cli.base.

Exit codes (cli.base.EXIT_CODES): 0 verified (or a command succeeded), 1 not verified,
2 usage or configuration errors, 3 nothing to fix, 4 flaky, 5 an environment problem.
"""
