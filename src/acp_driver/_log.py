"""The package's logger gets a ``NullHandler``: a library does not print through logging's
last-resort handler (``WARNING`` and up on stderr) when the application configured no logging.

Imported by each subpackage that logs (not by ``core``, which has no logging and stays free of
threading); an application that configures logging sees every record as before.
"""

from __future__ import annotations

import logging

PACKAGE_LOGGER = logging.getLogger("acp_driver")
if not any(isinstance(h, logging.NullHandler) for h in PACKAGE_LOGGER.handlers):
    PACKAGE_LOGGER.addHandler(logging.NullHandler())
