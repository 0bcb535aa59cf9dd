"""A library does not print through logging's last-resort handler: the package logger has a
``NullHandler``, installed by whichever public package is imported first. An application that
configures logging still sees every record."""

from __future__ import annotations

import subprocess
import sys

import pytest

PACKAGES = ["agent", "aio", "driver", "services", "trace", "remote", "net"]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("package", PACKAGES)
def test_a_warning_prints_nothing_without_logging_configured(package: str) -> None:
    done = _run(
        f"import logging, acp_driver.{package}\n"
        f"logging.getLogger('acp_driver.{package}.x').warning('a warning of the library')\n"
        "logging.getLogger('acp_driver.remote').error('an error of the library')\n"
        "print('ran')\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran\n"
    assert done.stderr == ""


def test_without_the_package_logging_prints_it() -> None:
    """The control: the same record through a logger of no package reaches stderr."""
    done = _run("import logging, acp_driver.driver\nlogging.getLogger('elsewhere').warning('seen')\n")
    assert done.stderr == "seen\n"


def test_an_application_that_configures_logging_sees_the_records() -> None:
    done = _run(
        "import logging, acp_driver.driver\n"
        "logging.basicConfig(format='%(name)s %(message)s')\n"
        "logging.getLogger('acp_driver.driver').warning('seen')\n"
    )
    assert done.stderr == "acp_driver.driver seen\n"
