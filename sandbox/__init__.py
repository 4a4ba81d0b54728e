"""What runs inside the isolated subprocess that executes one candidate memory program.

Imports nothing from ``mstar_ray``: the host side talks to it only through ``sandbox.wire``.
"""
