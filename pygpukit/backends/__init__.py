"""Backends: ``cpu`` (NumPy reference and CPU fallback); GPU backends register through routing."""
