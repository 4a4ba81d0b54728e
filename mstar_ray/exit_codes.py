"""The process exit codes of ``mstar-ray``, in one place for the CLI and the driver it runs."""

EXIT_OK = 0
EXIT_PROGRAM = 1  # the program broke the contract (statically, or at run time)
EXIT_INPUT = 2  # bad arguments, a config error, a missing or malformed data file
EXIT_ENDPOINT = 3  # an unusable LLM endpoint, a sandbox layer this machine cannot give, a run that cannot go on
EXIT_BUDGET = 4  # the budget is spent
