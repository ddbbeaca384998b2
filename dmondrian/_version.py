"""The package's version, declared once: ``pyproject.toml`` reads it from here
(setuptools' ``attr:``), and :data:`dmondrian.__version__` and the manifests
(:mod:`dmondrian.evaluation.manifest`) import it, installed or not."""

__version__ = "0.1.0"
