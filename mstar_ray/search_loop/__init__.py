"""The search's loop, Ray-free: what to run next and what a result means (``policy``), the end of the search
(``endgame``: confirmation, choice, test and fallback) and each reflection's model and instruction
(``steering``). It changes the search's state (``mstar_ray.state``) and calls the reflectors, so it stands above
them, while the parts it is built from (``mstar_ray.search``: subsets, split, selection, population, stop
conditions, work) stand below. It is a package of its own, not a folder of ``search/``, because ``state/``,
``reflect/`` and ``run_config`` import those parts: inside ``search/`` it would make each of them a cycle with it.
Anything that runs work (the Ray driver, or an in-process pool in the tests) drives it."""
