"""The search's loop, Ray-free: what to run next and what a result means (``policy``), the end of the search
(``endgame``: confirmation, choice, test and fallback) and each reflection's model and instruction
(``steering``). It changes the search's state (``mstar_ray.state``) and calls the reflectors, so it stands above
them, while the parts it is built from (``mstar_ray.search``: subsets, split, selection, population, stop
conditions, work) stand below. Anything that runs work (the Ray driver, or an in-process pool in the tests)
drives it."""
