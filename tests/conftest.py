"""Shared pytest fixtures: `quiver` runs the binary under test (see harness.py)."""
import os

import pytest

from harness import Quiver, quiver_bin


@pytest.fixture(scope="session")
def quiver():
    path = quiver_bin()
    if not os.access(path, os.X_OK):
        pytest.fail(f"quiver binary not found at {path}: run `cargo build -p quiver-cli` "
                    f"or set QUIVER_BIN", pytrace=False)
    return Quiver(path)
