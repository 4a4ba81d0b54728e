"""The host's half of the sandbox: the jail (``jail``), the fork server started in it (``fork_server``), what a
sandboxed process may send and how it is checked (``frames``), and a candidate's process started, called under
limits and killed (``process``). The half that runs inside is ``mstar_ray.sandbox`` (``sandbox/`` of a checkout)."""
