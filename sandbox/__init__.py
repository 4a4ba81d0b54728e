"""What runs inside the isolated subprocess that executes one candidate memory program.

Imports nothing from ``mstar_ray``, and its modules import each other relatively, so the package works under
either of its two names: ``mstar_ray.sandbox`` on the host (``mstar_ray/sandbox`` links to this folder, and an
install copies it there: no bare ``sandbox`` is installed), and ``sandbox`` inside the sandbox process, whose
path holds this package alone (``mstar_ray.sandbox_host.fork_server``). The host side talks to it only
through ``wire``.
"""
