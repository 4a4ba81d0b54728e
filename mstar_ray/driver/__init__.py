"""The Ray side of a run: start or join Ray, deploy what the run serves, hand the search loop's work
(``mstar_ray.search_loop``) to a pool of actors and record what comes back, with the live line; ``run``,
``resume``, ``transfer`` and ``ablate`` are the commands built on it. The search's decisions are not here."""
