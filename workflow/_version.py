"""The distribution's version, in one place: ``pyproject.toml`` reads it at build time
(``[tool.setuptools.dynamic]``), ``workflow.__version__`` and ``wf --version`` show it."""

VERSION = "0.2.0.dev0"
