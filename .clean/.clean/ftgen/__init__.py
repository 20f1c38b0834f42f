"""ftgen: a compiler from YAML kernel specs to fault-tolerant CUDA kernels."""

__version__ = "0.1.0"
