"""shapecheck: static shape and attention checks for PyTorch code."""

__version__ = "0.1.0"
