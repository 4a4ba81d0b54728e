"""mstar-ray: a distributed, resumable, sandboxed search for LLM-agent memory programs (M*)."""

from mstar_ray.blas import pin_blas_threads

# Here, the first code any mstar_ray process runs, so that it precedes every numpy import (mstar_ray.blas).
pin_blas_threads()

__version__ = "0.1.0"
