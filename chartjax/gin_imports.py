"""Imports every module that defines gin configurables, so gin files can name them.

Only chartjax/config.py (the gin edge of the command-line tools) imports this module.
"""

from chartjax import evaluate, mesh, optim, train  # noqa: F401
from chartjax.interop import configurables as interop_configurables  # noqa: F401
from chartjax.models import configurables  # noqa: F401
from chartjax.tasks import catalog  # noqa: F401
from chartjax.tasks.core import seq2seq  # noqa: F401
